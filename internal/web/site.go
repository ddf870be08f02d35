package web

import (
	"net/http"
	"net/url"

	"github.com/edgeq/edgeq/internal/vocab"
)

// CrossSite reports whether a browser sent r for a page of another site: a no-cors fetch or an
// auto-submitting form elsewhere, which carries the visitor's IP (and may carry cookies) without the
// visitor ever seeing the shop. Browsers say so in Sec-Fetch-Site (Fetch Metadata; Chromium 76,
// Firefox 90, Safari 16.4): "cross-site" is another site, "same-origin" and "same-site" are the
// shop's own pages, "none" is the visitor's own doing (the address bar, a bookmark). A value no
// browser sends counts as cross-site. Browsers without Fetch Metadata still send Origin on every
// POST: one naming another host than the request's, or "null" (a sandboxed frame, a data: URL), is
// cross-site. A request with neither header (an API client, curl) is not a browser acting for
// another site and is let through.
func CrossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "same-site", "none":
		return false
	case "":
	default:
		return true
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	return !sameHost(origin, r.Host)
}

// sameHost reports whether an Origin header (scheme://host[:port]) names the host of a Host header,
// port included: a port left out is the default of the Origin's scheme, on both sides.
func sameHost(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return false // "null" and anything malformed
	}
	defaultPort := "80"
	if u.Scheme == "https" {
		defaultPort = "443"
	}
	originName, originPort := vocab.HostName(u.Host), hostPort(u.Host)
	requestName, requestPort := vocab.HostName(host), hostPort(host)
	if originPort == "" {
		originPort = defaultPort
	}
	if requestPort == "" {
		requestPort = defaultPort
	}
	return originName != "" && originName == requestName && originPort == requestPort
}
