// Package certfiles serves TLS certificates from PEM files (docs/reference.md "TLS and HTTP/2"): each
// handshake gets the certificate whose leaf names the host the client asks for (SNI), wildcards
// included, and the files are looked at every few seconds, so a renewed certificate reaches new
// connections without a restart. A replacement that does not load leaves the previous certificate
// in service.
package certfiles

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeq/edgeq/internal/vocab"
)

// Pair is a certificate chain file (PEM, leaf first) and its private key file (PEM).
type Pair struct {
	CertFile, KeyFile string
}

// DefaultInterval is how often the files are looked at. A look is two stat calls per pair; a change
// is loaded on the look after the one that saw it, once the files have stopped changing.
const DefaultInterval = time.Second

// Options configures a Store.
type Options struct {
	Pairs    []Pair        // the first is the default certificate
	Logger   *slog.Logger  // reloads and failed reloads
	Interval time.Duration // between looks at the files; 0: DefaultInterval
	Now      func() time.Time
}

// Store holds the certificates in service. GetCertificate may be called from any goroutine; Watch
// runs in one.
type Store struct {
	opts    Options
	current atomic.Pointer[index]

	mu    sync.Mutex // one look at the files at a time
	pairs []served   // by position in opts.Pairs
}

// served is one pair's certificate in service and what its files looked like.
type served struct {
	cert   *tls.Certificate
	loaded stamp // the files the certificate was read from
	seen   stamp // the files at the last look
	failed stamp // files that did not load, not tried again until they change
	tried  bool  // failed is set
}

// Load reads every pair. Any pair that does not load is an error naming it
// ("certificates[1]: ..."): at start there is no previous certificate to keep serving.
func Load(opts Options) (*Store, error) {
	if len(opts.Pairs) == 0 {
		return nil, errors.New("certificates: none given")
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Store{opts: opts, pairs: make([]served, len(opts.Pairs))}
	for i, p := range opts.Pairs {
		cert, st, err := loadPair(p)
		if errors.Is(err, errChanging) {
			cert, st, err = loadPair(p) // written to as it was read: once more
		}
		if err != nil {
			return nil, fmt.Errorf("certificates[%d]: %w", i, err)
		}
		s.pairs[i] = served{cert: cert, loaded: st, seen: st}
		s.warnValidity(p, cert.Leaf)
	}
	s.publish()
	return s, nil
}

// GetCertificate is tls.Config.GetCertificate: the certificate for the name the client asked for,
// by exact name, then by the wildcard one label up ("*.example.com" for "shop.example.com": a
// wildcard covers one label, RFC 6125 section 6.4.3). Of several certificates for a name (RSA and
// ECDSA), the first the client can use. A client that names no host, or one no certificate names,
// gets the default (the first configured): it fails the client's name check as it would anywhere.
func (s *Store) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	ix := s.current.Load()
	name := strings.TrimSuffix(strings.ToLower(hello.ServerName), ".")
	candidates := ix.byName[name]
	if len(candidates) == 0 {
		if _, parent, ok := strings.Cut(name, "."); ok {
			candidates = ix.byName["*."+parent]
		}
	}
	if len(candidates) == 0 {
		candidates = ix.certs
	}
	for _, c := range candidates {
		if hello.SupportsCertificate(c) == nil {
			return c, nil
		}
	}
	return candidates[0], nil
}

// Watch looks at the files every Interval until ctx ends and puts changed pairs in service.
func (s *Store) Watch(ctx context.Context) {
	tick := time.NewTicker(s.opts.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			s.Look()
		}
	}
}

// Look checks every pair's files once. A pair whose files changed since the previous look is left
// for the next one, so that a cert_file and key_file replaced one after the other are read together
// (a certificate tool writes one, then the other). A pair that then does not load (a key that does
// not match, a truncated file) is logged once and its previous certificate stays in service.
func (s *Store) Look() {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for i, p := range s.opts.Pairs {
		sv := &s.pairs[i]
		now := statPair(p)
		switch {
		case now.equal(sv.loaded):
			sv.seen, sv.tried = now, false
			continue
		case !now.equal(sv.seen):
			sv.seen = now // still changing, or just changed: read it on the next look
			continue
		case sv.tried && now.equal(sv.failed):
			continue
		}
		cert, st, err := loadPair(p)
		if errors.Is(err, errChanging) {
			continue
		}
		if err != nil {
			sv.failed, sv.tried = now, true
			s.opts.Logger.Warn("TLS certificate files changed but do not load: the previous certificate is still served",
				"cert_file", p.CertFile, "key_file", p.KeyFile, "error", err.Error(),
				"serving_not_after", vocab.FormatTime(sv.cert.Leaf.NotAfter))
			continue
		}
		sv.cert, sv.loaded, sv.seen, sv.tried = cert, st, st, false
		changed = true
		s.opts.Logger.Info("TLS certificate reloaded", "cert_file", p.CertFile, "names", strings.Join(names(cert.Leaf), ","),
			"not_after", vocab.FormatTime(cert.Leaf.NotAfter))
		s.warnValidity(p, cert.Leaf)
	}
	if changed {
		s.publish()
	}
}

// Leaves returns the leaf of each certificate in service, in configuration order.
func (s *Store) Leaves() []*x509.Certificate {
	ix := s.current.Load()
	out := make([]*x509.Certificate, len(ix.certs))
	for i, c := range ix.certs {
		out[i] = c.Leaf
	}
	return out
}

func (s *Store) warnValidity(p Pair, leaf *x509.Certificate) {
	switch now := s.opts.Now(); {
	case now.After(leaf.NotAfter):
		s.opts.Logger.Warn("TLS certificate has expired: browsers refuse it", "cert_file", p.CertFile,
			"not_after", vocab.FormatTime(leaf.NotAfter))
	case now.Before(leaf.NotBefore):
		s.opts.Logger.Warn("TLS certificate is not valid yet: browsers refuse it", "cert_file", p.CertFile,
			"not_before", vocab.FormatTime(leaf.NotBefore))
	}
}

// index is the certificates in service, built anew on each change so that a handshake reads it
// without a lock.
type index struct {
	certs  []*tls.Certificate
	byName map[string][]*tls.Certificate
}

func (s *Store) publish() {
	ix := &index{byName: map[string][]*tls.Certificate{}}
	for _, sv := range s.pairs {
		ix.certs = append(ix.certs, sv.cert)
		for _, n := range names(sv.cert.Leaf) {
			ix.byName[n] = append(ix.byName[n], sv.cert)
		}
	}
	s.current.Store(ix)
}

// names are the host names a leaf is for, lower case: its DNS names, or, for a certificate that has
// none, its common name (browsers ignore it, but other clients still read it).
func names(leaf *x509.Certificate) []string {
	var out []string
	for _, n := range leaf.DNSNames {
		out = append(out, strings.TrimSuffix(strings.ToLower(n), "."))
	}
	if len(out) == 0 && leaf.Subject.CommonName != "" {
		out = append(out, strings.TrimSuffix(strings.ToLower(leaf.Subject.CommonName), "."))
	}
	return out
}

// errChanging: a file changed while it was read.
var errChanging = errors.New("the files changed while they were read")

// loadPair reads a pair, and fails with errChanging when either file changed meanwhile: a key read
// before a replacement and a certificate read after it are never put together.
func loadPair(p Pair) (*tls.Certificate, stamp, error) {
	before := statPair(p)
	certPEM, err := os.ReadFile(p.CertFile)
	if err != nil {
		return nil, stamp{}, fmt.Errorf("cert_file: %w", err)
	}
	keyPEM, err := os.ReadFile(p.KeyFile)
	if err != nil {
		return nil, stamp{}, fmt.Errorf("key_file: %w", err)
	}
	if !statPair(p).equal(before) {
		return nil, stamp{}, errChanging
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, stamp{}, fmt.Errorf("%s and %s: %w", p.CertFile, p.KeyFile, err)
	}
	if cert.Leaf == nil { // X509KeyPair fills it in since Go 1.23, unless GODEBUG x509keypairleaf=0
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, stamp{}, fmt.Errorf("cert_file: %w", err)
		}
	}
	return &cert, before, nil
}

// stamp is what two stat calls say of a pair: enough to see a file replaced (another inode), written
// in place (size, modification time) or gone.
type stamp struct{ cert, key os.FileInfo }

func statPair(p Pair) stamp {
	var s stamp
	s.cert, _ = os.Stat(p.CertFile) // follows symbolic links: a Kubernetes Secret's files are links
	s.key, _ = os.Stat(p.KeyFile)
	return s
}

func (a stamp) equal(b stamp) bool { return sameFile(a.cert, b.cert) && sameFile(a.key, b.key) }

func sameFile(a, b os.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}
