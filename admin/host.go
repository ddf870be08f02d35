package admin

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
)

// allowHosts refuses a Host that is not one (a malformed port, a name that is not a host name: 400
// INVALID_REQUEST, as on the public listener) and, with 421 MISDIRECTED_REQUEST, a request whose Host
// is not one the admin listener
// answers to (docs/reference.md "Admin listener"): an IP literal, localhost, none at all, or a name in
// allowed (admin.allowed_hosts). A DNS rebinding page makes a browser send the admin listener requests
// with Host set to the page's own name (evil.example, resolved to the admin address once the page has
// loaded), and would read /metrics or try the dashboard; under an address or localhost a browser never
// sends another site's page's requests. Prometheus scrapes by address and Kubernetes probes send the
// pod's IP, so both keep working; the probes are checked like every other path (/readyz names what is
// wrong with the store).
func allowHosts(allowed []string, misdirected interface{ Inc() }, rs *web.Responder, next http.Handler) http.Handler {
	names := make(map[string]bool, len(allowed))
	for _, name := range allowed {
		names[hostKey(name)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "" && !web.ValidHost(r.Host) {
			// Not a Host at all ("admin.example.com:abc"): refused as the public listener refuses it.
			rs.Error(w, r, web.ErrInvalidHost.Because(fmt.Errorf("the Host header %q", web.ClipLog(r.Host))))
			return
		}
		if !hostAllowed(r.Host, names) {
			if misdirected != nil {
				misdirected.Inc()
			}
			rs.Error(w, r, web.ErrMisdirected)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether the admin listener answers a request with this Host header.
func hostAllowed(host string, names map[string]bool) bool {
	name := hostKey(host)
	if name == "" || name == "localhost" || names[name] {
		return true
	}
	_, err := netip.ParseAddr(name)
	return err == nil
}

// hostKey is a Host header's name as the allowed names are compared: vocab.HostName, the name as
// sites are told apart (without the port and the trailing dot, in lower case, an IP literal without
// its brackets). One difference: a Host with more than one colon and no brackets is taken as an IPv6
// literal written without them (only a script sends one) and keeps its colons, rather than being cut
// at the first ("admin.example:9090:80" is not admin.example); it is lower-cased and trimmed the same.
func hostKey(host string) string {
	if !strings.HasPrefix(host, "[") && strings.Count(host, ":") > 1 {
		return strings.ToLower(strings.TrimSuffix(host, "."))
	}
	return vocab.HostName(host)
}
