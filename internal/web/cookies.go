package web

import (
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"time"
)

// Cookies sets edgeq's cookies: names start with edgeq_ (so the proxy never
// forwards them to the origin), HttpOnly, SameSite=Lax, Path=/, Max-Age the remaining life. Secure is
// tokens.cookie_secure: "auto" marks them Secure when the visitor's connection is HTTPS (directly or
// per a trusted proxy), "always" and "never" do what they say.
type Cookies struct {
	Secure string
}

// Set writes a cookie. Every edgeq cookie is a credential (a token, a place in line, a Turnstile
// clearance, a visitor id): the answer is marked as carrying one (Request.CredentialAdded).
func (p Cookies) Set(w http.ResponseWriter, r *http.Request, name, value string, life time.Duration) {
	p.Add(w.Header(), RequestFrom(r.Context()), name, value, life)
}

// Add is Set for a header about to be written, such as the shop's answer on its way to the visitor of
// request info. The cookie is added beside the Set-Cookie headers already there.
func (p Cookies) Add(h http.Header, info *Request, name, value string, life time.Duration) {
	info.CredentialAdded = true
	secure := p.Secure == "always" || (p.Secure == "auto" && info.Secure)
	//nolint:gosec // Secure is set by cookies.secure (always, or auto when the request came over TLS)
	c := &http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: max(1, int(life/time.Second)),
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode,
	}
	if v := c.String(); v != "" {
		h.Add("Set-Cookie", v)
	}
}

// CookieValue finds one cookie in the Cookie headers without parsing every cookie (gates run on every
// request). The value is not validated here: callers only trust values that verify.
//
// It reads the header as net/http does (so the gate and an origin written in Go agree on what a
// browser sent): parts split at ";", ASCII whitespace trimmed around each part and before the "=",
// one pair of surrounding double quotes removed.
func CookieValue(h http.Header, name string) (string, bool) {
	if name == "" {
		return "", false
	}
	for _, line := range h["Cookie"] {
		for line != "" {
			var part string
			part, line, _ = strings.Cut(line, ";")
			part = textproto.TrimString(part)
			if len(part) <= len(name) || part[:len(name)] != name {
				continue
			}
			rest := textproto.TrimString(part[len(name):])
			if rest == "" || rest[0] != '=' {
				continue
			}
			v := rest[1:]
			if len(v) > 1 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			return v, true
		}
	}
	return "", false
}

// SafeReturn returns target if it is a same-site relative path ("/..." but not "//..." or "/\..."),
// else "/": the waiting page and the challenge send visitors there, so it must never lead off-site.
func SafeReturn(target string) string {
	if len(target) == 0 || len(target) > 2048 || target[0] != '/' {
		return "/"
	}
	if len(target) > 1 && (target[1] == '/' || target[1] == '\\') {
		return "/"
	}
	for i := 0; i < len(target); i++ {
		// Browsers read a backslash as a slash, and drop tabs and newlines from URLs.
		if c := target[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return "/"
		}
	}
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(u.Path, "/") {
		return "/"
	}
	return target
}
