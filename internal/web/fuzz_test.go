package web

import (
	"net/http"
	"strings"
	"testing"
)

// FuzzCookieValue: the gate's own Cookie scan never panics, never returns more than one cookie's
// value, and agrees with net/http's parser whenever the header holds a single cookie that net/http
// accepts.
func FuzzCookieValue(f *testing.F) {
	f.Add("a=1; edgeq_tk_drop=abc.def; b=2", "edgeq_tk_drop")
	f.Add(`edgeq_tk_drop="quoted"`, "edgeq_tk_drop")
	f.Add("edgeq_tk_drop=;edgeq_tk_drop=second", "edgeq_tk_drop")
	f.Add("edgeq_tk_drop", "edgeq_tk_drop")
	f.Add(";;;=;", "")
	f.Add("p =p=", "p")
	f.Add("edgeq_tk_drop\t= v ", "edgeq_tk_drop")
	f.Add("x=\x00\xff; edgeq_rq_q=1", "edgeq_rq_q")
	f.Fuzz(func(t *testing.T, line, name string) {
		h := http.Header{"Cookie": {line}}
		v, found := CookieValue(h, name)
		if !found {
			if v != "" {
				t.Fatalf("not found but value %q", v)
			}
		} else if strings.Contains(v, ";") || !strings.Contains(line, v) || !strings.Contains(line, name) {
			t.Fatalf("CookieValue(%q, %q) = %q spans cookies", line, name, v)
		}
		if name == "" || strings.Contains(line, ";") {
			return
		}
		r := &http.Request{Header: h}
		if c, err := r.Cookie(name); err == nil {
			// A bare "name" is a cookie with an empty value to net/http; to the gate it is no cookie.
			if v != c.Value {
				t.Fatalf("CookieValue(%q, %q) = %q %v, net/http says %q", line, name, v, found, c.Value)
			}
		}
	})
}

// FuzzCorrelationID: a client's X-Correlation-ID is kept only when it is sane; whatever is returned is
// safe to log and to send on (1-128 characters of A-Z a-z 0-9 . _ : -).
func FuzzCorrelationID(f *testing.F) {
	f.Add("req-123")
	f.Add("")
	f.Add("a\r\nInjected: 1")
	f.Add(strings.Repeat("x", 129))
	f.Add(`{"json":1}`)
	f.Fuzz(func(t *testing.T, in string) {
		h := http.Header{}
		h.Set(CorrelationHeader, in)
		out := CorrelationID(h)
		if !saneID(out) {
			t.Fatalf("CorrelationID(%q) = %q is not sane", in, out)
		}
		if saneID(in) && out != in {
			t.Fatalf("sane id %q replaced by %q", in, out)
		}
	})
}
