package proxy

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/web"
)

// A shop's CORS answers let its scripts on other origins use Edgeq-Token: edgeq adds it to
// Access-Control-Expose-Headers of every answer that allows an origin, and to
// Access-Control-Allow-Headers of a preflight that asks for it, once, whatever the shop's spelling;
// an answer that allows no origin is left as the shop sent it.
func TestCORS_EdgeqTokenIsExposedAndAllowed(t *testing.T) {
	type answer map[string][]string
	cases := []struct {
		name          string
		method        string
		request       http.Header // besides Origin
		shop          answer      // CORS headers the shop answers with
		expose, allow []string    // what the client gets
	}{
		{name: "no CORS", method: "GET", shop: answer{}, expose: nil, allow: nil},
		{name: "allowed, nothing exposed", method: "GET", shop: answer{"Access-Control-Allow-Origin": {"https://app.example"}},
			expose: []string{"Edgeq-Token"}},
		{name: "allowed, a list exposed", method: "POST",
			shop:   answer{"Access-Control-Allow-Origin": {"https://app.example"}, "Access-Control-Expose-Headers": {"X-Cart, X-Total"}},
			expose: []string{"X-Cart, X-Total, Edgeq-Token"}},
		{name: "already exposed, another spelling", method: "GET",
			shop:   answer{"Access-Control-Allow-Origin": {"*"}, "Access-Control-Expose-Headers": {"X-Cart", "edgeq-token"}},
			expose: []string{"X-Cart", "edgeq-token"}},
		{name: "wildcard: credentialed requests need the name", method: "GET",
			shop:   answer{"Access-Control-Allow-Origin": {"https://app.example"}, "Access-Control-Expose-Headers": {"*"}},
			expose: []string{"*, Edgeq-Token"}},
		{name: "two lines: appended to the last", method: "GET",
			shop:   answer{"Access-Control-Allow-Origin": {"https://app.example"}, "Access-Control-Expose-Headers": {"X-Cart", "X-Total"}},
			expose: []string{"X-Cart", "X-Total, Edgeq-Token"}},
		{name: "preflight asking for it", method: "OPTIONS",
			request: http.Header{"Access-Control-Request-Method": {"POST"}, "Access-Control-Request-Headers": {"content-type,edgeq-token"}},
			shop:    answer{"Access-Control-Allow-Origin": {"https://app.example"}, "Access-Control-Allow-Headers": {"Content-Type"}},
			expose:  []string{"Edgeq-Token"}, allow: []string{"Content-Type, Edgeq-Token"}},
		{name: "preflight, the shop allows no header", method: "OPTIONS",
			request: http.Header{"Access-Control-Request-Method": {"GET"}, "Access-Control-Request-Headers": {"Edgeq-Token"}},
			shop:    answer{"Access-Control-Allow-Origin": {"https://app.example"}},
			expose:  []string{"Edgeq-Token"}, allow: []string{"Edgeq-Token"}},
		{name: "preflight, already allowed", method: "OPTIONS",
			request: http.Header{"Access-Control-Request-Method": {"POST"}, "Access-Control-Request-Headers": {"edgeq-token"}},
			shop:    answer{"Access-Control-Allow-Origin": {"https://app.example"}, "Access-Control-Allow-Headers": {"content-type, EDGEQ-TOKEN"}},
			expose:  []string{"Edgeq-Token"}, allow: []string{"content-type, EDGEQ-TOKEN"}},
		{name: "preflight not asking for it", method: "OPTIONS",
			request: http.Header{"Access-Control-Request-Method": {"POST"}, "Access-Control-Request-Headers": {"content-type"}},
			shop:    answer{"Access-Control-Allow-Origin": {"https://app.example"}, "Access-Control-Allow-Headers": {"Content-Type"}},
			expose:  []string{"Edgeq-Token"}, allow: []string{"Content-Type"}},
		{name: "preflight the shop refused", method: "OPTIONS",
			request: http.Header{"Access-Control-Request-Method": {"POST"}, "Access-Control-Request-Headers": {"edgeq-token"}},
			shop:    answer{}, expose: nil, allow: nil},
		{name: "not a preflight: Allow-Headers left alone", method: "GET",
			request: http.Header{"Access-Control-Request-Headers": {"edgeq-token"}},
			shop:    answer{"Access-Control-Allow-Origin": {"https://app.example"}, "Access-Control-Allow-Headers": {"Content-Type"}},
			expose:  []string{"Edgeq-Token"}, allow: []string{"Content-Type"}},
	}
	rg := newRig(t, rigOptions{
		routes: []config.Route{{Name: "api", Match: "/gated/"}},
		originHandler: func(w http.ResponseWriter, r *http.Request) {
			i, _ := strconv.Atoi(r.URL.Query().Get("case"))
			for k, v := range cases[i].shop {
				w.Header()[k] = v
			}
			w.WriteHeader(http.StatusNoContent)
		},
	})
	for i, c := range cases {
		for _, path := range []string{"/gated/cart", "/passing/cart"} { // a route, and no route
			req := rg.request(t, c.method, path+"?case="+strconv.Itoa(i), c.request)
			req.Header.Set("Origin", "https://app.example")
			resp, _ := rg.do(t, req)
			if got := resp.Header.Values("Access-Control-Expose-Headers"); !slices.Equal(got, c.expose) {
				t.Errorf("%s, %s: Access-Control-Expose-Headers %q, want %q", c.name, path, got, c.expose)
			}
			if got := resp.Header.Values("Access-Control-Allow-Headers"); !slices.Equal(got, c.allow) {
				t.Errorf("%s, %s: Access-Control-Allow-Headers %q, want %q", c.name, path, got, c.allow)
			}
		}
	}
}

// Edgeq-Token is read as the request arrives (exactly one value of at most maxTokenBytes) for the
// gate, and, like every client-sent Edgeq-* header, never reaches the shop.
func TestEdgeqTokenHeader_ReadForTheGateNeverForwarded(t *testing.T) {
	var claimed atomic.Value
	record := stepFunc{wrap: func(route config.Route, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			claimed.Store(web.RequestFrom(r.Context()).ClaimedToken)
			next.ServeHTTP(w, r)
		})
	}}
	rg := newRig(t, rigOptions{originHandler: echoHeaders, steps: []Step{record},
		routes: []config.Route{{Name: "api", Match: "/api/"}}})
	long := strings.Repeat("a", maxTokenBytes+1)
	for _, c := range []struct {
		name   string
		values []string
		want   string
	}{
		{"one", []string{"tok.en.sig"}, "tok.en.sig"},
		{"at the bound", []string{long[1:]}, long[1:]},
		{"too long", []string{long}, ""},
		{"two", []string{"a.b.c", "d.e.f"}, ""},
	} {
		req := rg.request(t, "GET", "/api/cart", http.Header{"Edgeq-Token": c.values, "Authorization": {"Bearer shop-session-abc"}})
		_, body := rg.do(t, req)
		if got := claimed.Load(); got != c.want {
			t.Errorf("%s: ClaimedToken %q, want %q", c.name, got, c.want)
		}
		h := decodeHeaders(t, body)
		if h.Get("Edgeq-Token") != "" || h.Get("Authorization") != "Bearer shop-session-abc" {
			t.Errorf("%s: the origin received Edgeq-Token %q, Authorization %q", c.name, h.Get("Edgeq-Token"), h.Get("Authorization"))
		}
	}
}
