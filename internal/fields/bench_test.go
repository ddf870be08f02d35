package fields

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/edgeq/edgeq/internal/config"
)

// BenchmarkCheckoutFields reads what a typical checkout route reads (a form quantity, a header user,
// normalised) from a browser-like request: the admission step's share of the field rules.
func BenchmarkCheckoutFields(b *testing.B) {
	quantity, _ := config.ParseFieldSource("form:quantity")
	user, _ := config.ParseFieldSource("header:X-User")
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest("POST", "/checkout/p", strings.NewReader("quantity=1&note=gift"))
		for k, v := range map[string]string{"Content-Type": "application/x-www-form-urlencoded", "X-User": "Buyer-17",
			"Accept": "text/html", "Accept-Language": "en", "User-Agent": "Mozilla/5.0", "Cookie": "a=1; b=2",
			"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "navigate", "Origin": "https://shop.example"} {
			r.Header.Set(k, v)
		}
		f := New(r, 1<<20)
		if _, _, e := f.Get(quantity); e != nil {
			b.Fatal(e)
		}
		v, _, e := f.Get(user)
		if e != nil {
			b.Fatal(e)
		}
		if _, e := Identity(v, "header"); e != nil {
			b.Fatal(e)
		}
	}
}
