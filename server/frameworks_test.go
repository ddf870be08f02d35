package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// PHP's $_REQUEST (request_order unset: cookies override the query and the body)
// and classic ASP.NET's Request[name] merge cookies with form fields. With a cookie sku=42 beside
// the form's sku=unguarded-x, edgeq read an unknown product and passed it (unknown_product: pass)
// while the shop sold product 42 without admission. Such a request is now 400, the shop untouched;
// the same form without the cookie is admitted or passed as before.
func TestFrameworks_ACookieNamedLikeAFormFieldIsRefused(t *testing.T) {
	var hits atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(origin.Close)
	in := start(t, configText(origin.URL, `  - name: cart
    match: "POST /cart/add"
    admission: {type: stock, product: "form:sku", user: "header:X-User", unknown_product: pass}
products:
  - {id: "42", stock: 5, per_user_limit: 5}`))
	add := func(body, cookie string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", in.public+"/cart/add", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-User", "alice")
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, cookie := range []string{"sku=42", "session=s1; SKU=42", "s%6Bu=42"} {
		before := hits.Load()
		code, body := add("sku=unguarded-x", cookie)
		if code != 400 || !strings.Contains(body, `"field":"sku"`) || hits.Load() != before {
			t.Errorf("form sku=unguarded-x, Cookie %q: %d %s (shop reached %d times)", cookie, code, body, hits.Load()-before)
		}
	}
	// Without the cookie: an unknown product passes, a known one is admitted.
	if code, body := add("sku=unguarded-x", "session=s1"); code != 200 {
		t.Errorf("an unknown product without the cookie: %d %s", code, body)
	}
	if code, body := add("sku=42", "session=s1"); code != 200 {
		t.Errorf("product 42 without the cookie: %d %s", code, body)
	}
}
