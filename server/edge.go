package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/edgeq/edgeq/internal/acme"
	"github.com/edgeq/edgeq/internal/certfiles"
	"github.com/edgeq/edgeq/internal/certstore"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
)

// edgeTLS is the TLS listener of edgeq alone at the edge (docs/reference.md "TLS and HTTP/2"): the
// public handler over HTTPS, HTTP/1.1 and HTTP/2 by ALPN, certificates from files and automatic ones.
type edgeTLS struct {
	server *http.Server
	ln     net.Listener
	certs  *certfiles.Store // nil without certificate files
	acme   *acme.Manager    // nil without automatic certificates
}

// loadCertificates reads server.tls.certificates; nil when there is no TLS listener or no file.
// Start-up and `edgeq check` both call it, so a certificate that does not load stops both.
func loadCertificates(cfg *config.Config, logger *slog.Logger) (*certfiles.Store, error) {
	t := cfg.Server.TLS
	if t.Listen == "" || len(t.Certificates) == 0 {
		return nil, nil
	}
	pairs := make([]certfiles.Pair, len(t.Certificates))
	for i, c := range t.Certificates {
		pairs[i] = certfiles.Pair{CertFile: c.CertFile, KeyFile: c.KeyFile}
	}
	certs, err := certfiles.Load(certfiles.Options{Pairs: pairs, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("server.tls.%w", err)
	}
	return certs, nil
}

// acmeRoots reads server.tls.acme.ca_file: nil for the system's roots. Start-up and `edgeq check`
// both call it.
func acmeRoots(cfg *config.Config) (*x509.CertPool, error) {
	a := cfg.Server.TLS.ACME
	if cfg.Server.TLS.Listen == "" || !a.Enabled() || a.CAFile == "" {
		return nil, nil
	}
	roots, err := acme.LoadRoots(a.CAFile)
	if err != nil {
		return nil, fmt.Errorf("server.tls.acme.ca_file: %v", err)
	}
	return roots, nil
}

// listenTLS loads the certificates, binds server.tls.listen and builds its server around handler,
// with the public listener's limits; plain is server.listen as bound, where HTTP-01 checks arrive.
// The expiry of the certificates is exported on built's registry.
func listenTLS(cfg *config.Config, built *parts, handler http.Handler, public *http.Server, plain net.Addr,
	challenges []string, logger *slog.Logger) (*edgeTLS, error) {
	t := cfg.Server.TLS
	if t.Listen == "" {
		return nil, nil
	}
	certs, err := loadCertificates(cfg, logger)
	if err != nil {
		return nil, err
	}
	roots, err := acmeRoots(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", t.Listen)
	if err != nil {
		return nil, fmt.Errorf("server.tls.listen: %v", err)
	}
	e := &edgeTLS{ln: ln, certs: certs}
	var leaves []func() []*x509.Certificate
	if certs != nil {
		leaves = append(leaves, certs.Leaves)
	}
	if t.ACME.Enabled() {
		// The store shares certificates, the account and the ordering lock between replicas; a
		// directory keeps them for one process across restarts.
		var storage certmagic.Storage = certstore.New(built.store.Client, built.store.Keys)
		if t.ACME.Storage != "" {
			storage = acme.FileStorage(t.ACME.Storage)
		}
		e.acme = acme.New(acme.Options{
			Domains: t.ACME.Domains, Email: t.ACME.Email, Directory: t.ACME.Directory(), Roots: roots,
			Storage: storage, HTTPAddr: plain, TLSAddr: ln.Addr(), Logger: logger, Challenges: challenges,
		})
		leaves = append(leaves, e.acme.Leaves)
	}
	built.registry.MustRegister(certfiles.ExpiryCollector(time.Now, leaves...))
	if t.HSTS != "" {
		handler = withHSTS(handler, t.HSTS)
	}
	e.server = &http.Server{
		Handler:           handler,
		TLSConfig:         tlsConfig(t.MinVersion, e.getCertificate),
		ReadHeaderTimeout: public.ReadHeaderTimeout, // also bounds the TLS handshake
		IdleTimeout:       public.IdleTimeout,
		MaxHeaderBytes:    public.MaxHeaderBytes, // HTTP/2 advertises it as SETTINGS_MAX_HEADER_LIST_SIZE
		ErrorLog:          public.ErrorLog,
		Protocols:         new(http.Protocols),
	}
	// net/http adds h2 and http/1.1 to the ALPN list of a server that serves both (RFC 7301); a CA's
	// TLS-ALPN-01 check offers acme-tls/1 alone, which only it ever asks for.
	e.server.Protocols.SetHTTP1(true)
	e.server.Protocols.SetHTTP2(true)
	if e.acme != nil {
		e.server.TLSConfig.NextProtos = []string{"h2", "http/1.1", acme.ALPN}
	}
	return e, nil
}

// getCertificate picks a handshake's certificate: a CA's TLS-ALPN-01 check gets its challenge
// certificate; a name in server.tls.acme.domains its automatic certificate, or while there is none
// yet a file's that names it; any other name the files' choice (certfiles.Store.GetCertificate),
// or without files the automatic certificates' default.
func (e *edgeTLS) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if e.acme != nil && (e.certs == nil || acme.IsChallenge(hello)) {
		return e.acme.GetCertificate(hello)
	}
	if e.acme != nil && e.acme.Manages(hello.ServerName) {
		if cert, err := e.acme.GetCertificate(hello); err == nil {
			return cert, nil
		}
	}
	return e.certs.GetCertificate(hello)
}

// tls12Suites are the TLS 1.2 suites offered: ECDHE key exchange (forward secrecy) with an AEAD
// cipher, Mozilla's "intermediate" list; HTTP/2 requires the first RSA one (RFC 9113 section
// 9.2.2). TLS 1.3 suites are not configurable in Go and are all AEAD.
var tls12Suites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305,
}

// tlsConfig is the TLS listener's configuration for server.tls.min_version ("1.2" or "1.3", as
// validated).
func tlsConfig(minVersion string, getCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12, CipherSuites: tls12Suites, GetCertificate: getCertificate}
	if minVersion == "1.3" {
		c.MinVersion = tls.VersionTLS13
	}
	return c
}

// plainProtocols is what server.listen speaks: HTTP/1.1, and with server.h2c HTTP/2 by prior
// knowledge (RFC 9113 section 3.3), which load balancers use toward their backends. The Upgrade:
// h2c dance of RFC 7540 is not offered (RFC 9113 deprecates it). nil leaves net/http's default, HTTP/1.1
// alone on a listener without TLS.
func plainProtocols(h2c bool) *http.Protocols {
	if !h2c {
		return nil
	}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return p
}

// withHSTS puts server.tls.hsts on every answer, edgeq's and the shop's: set as the header is
// written, it replaces a Strict-Transport-Security the shop sent, so what the operator configured
// at the edge is what browsers keep (they read the first of several, RFC 6797 section 8.1).
func withHSTS(next http.Handler, value string) http.Handler {
	header := []string{value}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&hstsWriter{ResponseWriter: w, value: header}, r)
	})
}

// hstsWriter sets the header before the first byte of the answer goes out. Hijack, deadlines and
// the like reach the connection's writer through Unwrap (http.ResponseController).
type hstsWriter struct {
	http.ResponseWriter
	value []string
	set   bool
}

func (w *hstsWriter) header() {
	if !w.set {
		w.set = true
		w.ResponseWriter.Header()["Strict-Transport-Security"] = w.value
	}
}

func (w *hstsWriter) WriteHeader(code int) {
	w.header()
	w.ResponseWriter.WriteHeader(code)
}

func (w *hstsWriter) Write(b []byte) (int, error) {
	w.header()
	return w.ResponseWriter.Write(b)
}

func (w *hstsWriter) FlushError() error {
	w.header()
	return http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *hstsWriter) Flush() { _ = w.FlushError() }

func (w *hstsWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// redirectHTTP answers requests on the plain listener with 308 to the same host, path and query on
// the TLS listener (308 keeps the method and body, RFC 9110 section 15.4.9). Passed on instead:
// ACME HTTP-01 challenges, which must be answered over plain HTTP (RFC 8555 section 8.3), and
// health checks, which a load balancer sends to the plain port; requests without a Host (an
// HTTP/1.0 health checker's) or with one the proxy will refuse anyway; and requests a trusted
// proxy says reached it over HTTPS, which would otherwise come back to it redirected forever.
type redirectHTTP struct {
	next    http.Handler
	port    string // ":8443", or "" for 443
	trusted []netip.Prefix
}

func newRedirectHTTP(next http.Handler, tlsAddr net.Addr, trusted []string) *redirectHTTP {
	h := &redirectHTTP{next: next}
	if _, port, err := net.SplitHostPort(tlsAddr.String()); err == nil && port != "443" {
		h.port = ":" + port
	}
	for _, p := range trusted {
		if prefix, err := config.ParseCIDR(p); err == nil { // validated at load
			h.trusted = append(h.trusted, prefix)
		}
	}
	return h
}

func (h *redirectHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.redirects(r) {
		h.next.ServeHTTP(w, r)
		return
	}
	name, _ := vocab.SplitHost(r.Host)
	// RequestURI is the path and query as the client sent them; an absolute-form target
	// ("GET http://shop/x") is rebuilt from its URL.
	target := r.RequestURI
	if !strings.HasPrefix(target, "/") {
		target = r.URL.EscapedPath()
		if r.URL.RawQuery != "" {
			target += "?" + r.URL.RawQuery
		}
	}
	//nolint:gosec // the same host (checked by web.ValidHost) and path, over HTTPS
	http.Redirect(w, r, "https://"+name+h.port+target, http.StatusPermanentRedirect)
}

func (h *redirectHTTP) redirects(r *http.Request) bool {
	path := r.URL.Path
	if strings.HasPrefix(path, "/.well-known/acme-challenge/") || path == "/healthz" || path == "/readyz" ||
		!strings.HasPrefix(path, "/") || r.Host == "" || !web.ValidHost(r.Host) {
		return false
	}
	if len(h.trusted) > 0 {
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil && h.trustedPeer(ap.Addr().Unmap()) {
			proto := r.Header.Values("X-Forwarded-Proto")
			if len(proto) > 0 {
				last := proto[len(proto)-1]
				last = last[strings.LastIndexByte(last, ',')+1:]
				if strings.EqualFold(strings.TrimSpace(last), "https") {
					return false
				}
			}
		}
	}
	return true
}

func (h *redirectHTTP) trustedPeer(a netip.Addr) bool {
	for _, p := range h.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
