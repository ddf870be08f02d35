package waitroom

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/edgeq/edgeq/internal/web"
)

// CookiePolicy is tokens.cookie_secure: "auto" marks cookies Secure when the visitor's connection is
// HTTPS (directly or per a trusted proxy), "always" and "never" do what they say.
type CookiePolicy struct {
	Secure string
}

// set writes one of edgeq's cookies (CONTRACT section 5): HttpOnly, SameSite=Lax, Path=/, Max-Age the
// remaining life. Names start with edgeq_, so the proxy never forwards them to the origin.
func (p CookiePolicy) set(w http.ResponseWriter, r *http.Request, name, value string, life time.Duration) {
	secure := p.Secure == "always" || (p.Secure == "auto" && web.RequestFrom(r.Context()).Secure)
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: max(1, int(life/time.Second)),
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode,
	})
}

// clear removes one of edgeq's cookies.
func (p CookiePolicy) clear(w http.ResponseWriter, name string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode})
}

// requestCookieLife is how long a request cookie lasts: long enough for any wait.
const requestCookieLife = 24 * time.Hour

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
