package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// TLS is edgeq's own HTTPS listener, for edgeq alone at the edge (docs/reference.md "TLS and
// HTTP/2"): certificates from files, chosen by the name the client asks for (SNI) and reloaded when
// the files change, and automatic ones from an ACME certificate authority; HTTP/2 by ALPN beside
// HTTP/1.1.
type TLS struct {
	// Listen is the TLS listener's host:port; "" = none, and the other keys are not used.
	Listen string `yaml:"listen"`
	// Certificates are read at start and watched: a replaced pair is served to new connections
	// without a restart. The first is the default, for clients that name no host or another one.
	Certificates []Certificate `yaml:"certificates"`
	// ACME gets and renews certificates for its domains by itself.
	ACME ACME `yaml:"acme"`
	// RedirectHTTP makes server.listen answer 308 to the same URL on the TLS listener.
	RedirectHTTP bool `yaml:"redirect_http"`
	// MinVersion is the lowest TLS version offered: "1.2" or "1.3".
	MinVersion string `yaml:"min_version"`
	// HSTS is the Strict-Transport-Security value of every answer on the TLS listener; "" = none.
	HSTS string `yaml:"hsts"`
}

// Certificate is one certificate chain (leaf first, as PEM) and its private key (PEM).
type Certificate struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// ACME is automatic certificates (docs/reference.md "Automatic certificates"): ordered from the
// certificate authority's ACME directory, proved over HTTP-01 on server.listen or TLS-ALPN-01 on
// server.tls.listen, renewed a third of their lifetime before they expire, and shared by replicas
// (certificates, account and the lock that makes one order) through the store or a directory.
type ACME struct {
	// Domains are the names certificates are ordered for, one certificate each; none = off.
	Domains []string `yaml:"domains"`
	// Email is the ACME account's contact (expiry warnings from the CA); "" = none.
	Email string `yaml:"email"`
	// DirectoryURL is the CA's ACME directory; "" = Let's Encrypt's production directory.
	DirectoryURL string `yaml:"directory_url"`
	// CAFile is a PEM bundle of roots to trust for the directory's own HTTPS (a private CA);
	// "" = the system's roots.
	CAFile string `yaml:"ca_file"`
	// Storage is a directory to keep certificates and the account in; "" = edgeq's store.
	Storage string `yaml:"storage"`
}

// LetsEncrypt is the directory of Let's Encrypt's production CA, the default directory_url.
const LetsEncrypt = "https://acme-v02.api.letsencrypt.org/directory"

// Enabled reports whether automatic certificates are configured.
func (a ACME) Enabled() bool { return len(a.Domains) > 0 }

// Directory is directory_url, or Let's Encrypt's when it is empty.
func (a ACME) Directory() string {
	if a.DirectoryURL == "" {
		return LetsEncrypt
	}
	return a.DirectoryURL
}

// checkTLS checks server.tls. The certificate files themselves are read by the server at start and
// by `edgeq check`, not here: the configuration package reads no key material.
func (cfg *Config) checkTLS(c *check) {
	t := cfg.Server.TLS
	c.oneOf("server.tls.min_version", t.MinVersion, "1.2", "1.3")
	if t.HSTS != "" {
		if err := checkHSTS(t.HSTS); err != nil {
			c.add("server.tls.hsts", "%q: %v", t.HSTS, err)
		}
	}
	if t.Listen == "" {
		// Both would silently do nothing: HSTS is only ever sent over TLS (RFC 6797 section 7.2),
		// and a redirect needs somewhere to send the visitor.
		if t.RedirectHTTP {
			c.add("server.tls.redirect_http", "needs server.tls.listen (a TLS listener to send visitors to)")
		}
		if t.HSTS != "" {
			c.add("server.tls.hsts", "needs server.tls.listen: it is sent on answers of edgeq's TLS listener only "+
				"(behind a load balancer that terminates TLS, set it there)")
		}
		if t.ACME.Enabled() {
			c.add("server.tls.acme.domains", "needs server.tls.listen (the listener that serves the certificates)")
		}
		return
	}
	c.hostPort("server.tls.listen", t.Listen)
	for _, other := range []struct{ key, value string }{{"server.listen", cfg.Server.Listen}, {"admin.listen", cfg.Admin.Listen}} {
		if t.Listen == other.value && !strings.HasSuffix(t.Listen, ":0") {
			c.add("server.tls.listen", "must differ from %s", other.key)
		}
	}
	if len(t.Certificates) == 0 && !t.ACME.Enabled() {
		c.add("server.tls.certificates", "needs at least one {cert_file, key_file} for server.tls.listen, "+
			"or server.tls.acme.domains for automatic certificates")
	}
	checkACME(c, t.ACME)
	for i, cert := range t.Certificates {
		path := fmt.Sprintf("server.tls.certificates[%d]", i)
		if cert.CertFile == "" {
			c.add(path+".cert_file", "must not be empty")
		}
		if cert.KeyFile == "" {
			c.add(path+".key_file", "must not be empty")
		}
	}
}

// checkACME checks server.tls.acme. An email, directory, CA file or storage without domains would
// silently order nothing, so they need domains.
func checkACME(c *check, a ACME) {
	if !a.Enabled() {
		if a.Email != "" || a.DirectoryURL != "" || a.CAFile != "" || a.Storage != "" {
			c.add("server.tls.acme.domains", "needs at least one domain: the other acme keys are set, but no "+
				"certificate would be ordered")
		}
		return
	}
	seen := map[string]bool{}
	for i, d := range a.Domains {
		path := fmt.Sprintf("server.tls.acme.domains[%d]", i)
		name := strings.ToLower(strings.TrimSuffix(d, "."))
		switch {
		case strings.HasPrefix(d, "*."):
			// A wildcard needs the DNS-01 challenge, which needs the DNS provider's API.
			c.add(path, "%q: wildcard names need a DNS challenge, which edgeq does not do; name each host, "+
				"or give a wildcard certificate in server.tls.certificates", d)
		case !hostName(d) || !strings.Contains(name, ".") || net.ParseIP(d) != nil:
			c.add(path, "%q is not a public host name (no IP address, port, scheme or path)", d)
		case seen[name]:
			c.add(path, "%q is listed twice", d)
		}
		seen[name] = true
	}
	if a.Email != "" && (!strings.Contains(a.Email, "@") || strings.ContainsAny(a.Email, " <>,")) {
		c.add("server.tls.acme.email", "%q is not an email address", a.Email)
	}
	if a.DirectoryURL != "" {
		if u, err := url.Parse(a.DirectoryURL); err != nil || u.Scheme != "https" || u.Host == "" {
			c.add("server.tls.acme.directory_url", "%q is not an https:// URL (ACME is spoken over HTTPS only)", a.DirectoryURL)
		}
	}
}

// checkHSTS accepts a Strict-Transport-Security value (RFC 6797 section 6.1): max-age=SECONDS, and
// includeSubDomains and preload at most once each, in any letter case. Unknown directives are refused
// rather than passed on: browsers ignore them, so a misspelt includeSubDomains would go unnoticed.
func checkHSTS(value string) error {
	seen := map[string]bool{}
	for directive := range strings.SplitSeq(value, ";") {
		name, arg, hasArg := strings.Cut(strings.TrimSpace(directive), "=")
		name = strings.ToLower(strings.TrimSpace(name))
		arg = strings.Trim(strings.TrimSpace(arg), `"`)
		switch {
		case name == "" && !hasArg:
			continue // "max-age=1;" ends with an empty directive, which the grammar allows
		case seen[name]:
			return fmt.Errorf("%s is given twice", name)
		case name == "max-age":
			if arg == "" || strings.Trim(arg, "0123456789") != "" {
				return fmt.Errorf("max-age must be a number of seconds")
			}
		case name == "includesubdomains" || name == "preload":
			if hasArg {
				return fmt.Errorf("%s takes no value", name)
			}
		default:
			return fmt.Errorf("unknown directive %q (max-age, includeSubDomains, preload)", name)
		}
		seen[name] = true
	}
	if !seen["max-age"] {
		return fmt.Errorf("max-age is required, e.g. max-age=31536000")
	}
	return nil
}
