// Package acme gets and renews edgeq's TLS certificates by itself from an ACME certificate authority
// (Let's Encrypt, or a private one) with caddyserver/certmagic, the engine Caddy uses. The names are
// proved over HTTP-01, answered on edgeq's plain listener, or TLS-ALPN-01, answered on its TLS
// listener. Certificates, the ACME account and the lock that makes one order are kept in a
// certmagic.Storage shared by every replica (edgeq's store, or a directory), so several replicas make
// one order, and any replica answers a challenge that another started.
package acme

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/certmagic"
)

// Options configures a Manager.
type Options struct {
	Domains   []string // the names, one certificate each
	Email     string   // the account's contact; "" = none
	Directory string   // the CA's ACME directory URL
	// Roots are trusted for the directory's HTTPS; nil = the system's roots.
	Roots   *x509.CertPool
	Storage certmagic.Storage
	// HTTPAddr and TLSAddr are edgeq's plain and TLS listeners as bound: the ports where the CA's
	// HTTP-01 and TLS-ALPN-01 checks arrive (directly on 80 and 443, or forwarded there).
	HTTPAddr, TLSAddr net.Addr
	Logger            *slog.Logger
	// Challenges are the challenge types used, "http-01" and "tls-alpn-01"; nil = both (a test pins
	// one to prove it).
	Challenges []string
}

// Manager keeps the certificates of Options.Domains: obtained after Start, renewed in the background
// until Stop.
type Manager struct {
	cache   *certmagic.Cache
	magic   *certmagic.Config
	issuer  *certmagic.ACMEIssuer
	domains []string
	names   map[string]bool // lower case, without a trailing dot
}

// New builds the manager; nothing is ordered before Start.
func New(o Options) *Manager {
	m := &Manager{domains: o.Domains, names: map[string]bool{}}
	for _, d := range o.Domains {
		m.names[normal(d)] = true
	}
	logger := zapLogger(slog.New(o.Logger.Handler().WithAttrs([]slog.Attr{slog.String("component", "acme")})))
	m.cache = certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert: func(certmagic.Certificate) (*certmagic.Config, error) { return m.magic, nil },
		Logger:           logger,
	})
	// OCSP stapling is certmagic's default: the response is fetched, kept in the storage and stapled
	// when the certificate names a responder (Let's Encrypt's no longer do).
	m.magic = certmagic.New(m.cache, certmagic.Config{
		Storage: o.Storage, Logger: logger, DefaultServerName: normal(o.Domains[0]),
	})
	host, httpPort := hostPort(o.HTTPAddr)
	_, tlsPort := hostPort(o.TLSAddr)
	// certmagic binds the challenge ports itself unless something listens there already: edgeq's own
	// listeners, which answer the challenges (HTTPHandler, GetCertificate).
	m.issuer = certmagic.NewACMEIssuer(m.magic, certmagic.ACMEIssuer{
		CA: o.Directory, Email: o.Email, Agreed: true, TrustedRoots: o.Roots,
		ListenHost: host, AltHTTPPort: httpPort, AltTLSALPNPort: tlsPort, Logger: logger,
		DisableHTTPChallenge:    o.Challenges != nil && !slices.Contains(o.Challenges, "http-01"),
		DisableTLSALPNChallenge: o.Challenges != nil && !slices.Contains(o.Challenges, "tls-alpn-01"),
	})
	m.magic.Issuers = []certmagic.Issuer{m.issuer}
	return m
}

// Start loads what the storage holds and orders what it lacks, in the background: a handshake for a
// name without a certificate yet fails until one is obtained. ctx bounds the first orders.
func (m *Manager) Start(ctx context.Context) error {
	return m.magic.ManageAsync(ctx, m.domains)
}

// Stop ends the renewals.
func (m *Manager) Stop() { m.cache.Stop() }

// Manages reports whether name (a ClientHello's server name) is one of the domains.
func (m *Manager) Manages(name string) bool { return m.names[normal(name)] }

// IsChallenge reports whether a ClientHello is a CA's TLS-ALPN-01 check (RFC 8737 section 3: the
// single protocol acme-tls/1, and the name being proved).
func IsChallenge(hello *tls.ClientHelloInfo) bool {
	return hello.ServerName != "" && len(hello.SupportedProtos) == 1 && hello.SupportedProtos[0] == ALPN
}

// ALPN is the protocol of TLS-ALPN-01 checks, which the TLS listener must offer.
const ALPN = "acme-tls/1"

// GetCertificate is tls.Config.GetCertificate for the domains and for TLS-ALPN-01 checks (whichever
// replica began the order: the challenge is read from the storage).
func (m *Manager) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return m.magic.GetCertificate(hello)
}

// HTTPHandler answers HTTP-01 checks (/.well-known/acme-challenge/TOKEN for a name being proved, from
// memory or the storage) and passes every other request to next.
func (m *Manager) HTTPHandler(next http.Handler) http.Handler {
	return m.issuer.HTTPChallengeHandler(next)
}

// Leaves are the leaves of the certificates in service for the domains, for the expiry metric.
func (m *Manager) Leaves() []*x509.Certificate {
	var out []*x509.Certificate
	seen := map[string]bool{}
	for _, d := range m.domains {
		for _, c := range m.cache.AllMatchingCertificates(normal(d)) {
			if c.Leaf != nil && !seen[c.Hash()] {
				seen[c.Hash()] = true
				out = append(out, c.Leaf)
			}
		}
	}
	return out
}

// LoadRoots reads a PEM bundle of roots (server.tls.acme.ca_file).
func LoadRoots(file string) (*x509.CertPool, error) {
	raw, err := os.ReadFile(file) //nolint:gosec // a file the configuration names, by the operator
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(raw) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}

// FileStorage keeps certificates and the account in a directory (server.tls.acme.storage), for one
// process whose store does not outlive it.
func FileStorage(dir string) certmagic.Storage { return &certmagic.FileStorage{Path: dir} }

func normal(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) }

// hostPort splits a bound listener's address; the host is "" for a wildcard address.
func hostPort(a net.Addr) (string, int) {
	if a == nil {
		return "", 0
	}
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return "", 0
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = ""
	}
	n, _ := strconv.Atoi(port)
	return host, n
}
