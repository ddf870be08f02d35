package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/edgeq/edgeq/internal/web"
)

// Issue 14: real clients in front of real shops, end to end through a running edgeq.

// A visitor cannot turn a request into a log line as large as the request: every value it controls
// is clipped in the access log, in the cause of a refusal and on the admin listener.
func TestLogs_VisitorValuesAreClipped(t *testing.T) {
	origin := newRecordingOrigin(t)
	in := start(t, strings.Replace(hostileConfig(origin.URL), "log: {level: error}", "log: {level: debug}", 1))
	huge := strings.Repeat("p", 60<<10) // about as large as a request line or header may be (64 KiB)
	cases := []struct {
		name, method, url string
		header            http.Header
		status            int
	}{
		{"a huge path", "GET", in.public + "/" + huge, nil, http.StatusOK},
		{"a huge refused Content-Type", "POST", in.public + "/checkout/1",
			http.Header{"Content-Type": {huge}, "X-User": {"alice"}}, http.StatusUnsupportedMediaType},
		{"a huge product id", "POST", in.public + "/checkout/" + huge,
			http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "X-User": {"alice"}}, http.StatusBadRequest},
		{"a huge path on the admin listener", "GET", in.admin + "/api/" + huge,
			http.Header{"Authorization": {"Bearer the-admin-key"}}, http.StatusNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := send(c.method, c.url, c.header)
			if err != nil || r.status != c.status {
				t.Fatalf("%v: status %d, want %d: %.300s", err, r.status, c.status, r.body)
			}
		})
	}
	const bound = 8 * web.LogValueMax // a line may carry a few clipped values, escaped
	clipped := 0
	for _, line := range strings.Split(in.logs.String(), "\n") {
		if len(line) > bound {
			t.Errorf("a log line of %d bytes (bound %d): %.300s...", len(line), bound, line)
		}
		if strings.Contains(line, "...[clipped, ") {
			clipped++
		}
	}
	// The lines were written (clipped), so the bound above looked at them.
	if clipped < len(cases) {
		t.Fatalf("%d clipped values in the logs, want at least %d:\n%.3000s", clipped, len(cases), in.logs.String())
	}
	want := fmt.Sprintf(`"path":"/%s...[clipped, %d bytes]"`, huge[:web.LogValueMax-1], len(huge)+1)
	if !strings.Contains(in.logs.String(), want) {
		t.Fatalf("the access line of the huge path does not show its start and length")
	}
}

// "post /checkout/1" is a checkout to Flask, Django, Symfony and Laravel, which upper-case the method
// before routing: edgeq admits it exactly like "POST /checkout/1" (per-user limit and stock included),
// and the shop receives POST.
func TestMethods_LowerCaseCheckoutIsAdmittedLikePOST(t *testing.T) {
	origin := newRecordingOrigin(t)
	in := start(t, hostileConfig(origin.URL))
	var answers []string
	for _, method := range []string{"post", "Post", "POST"} {
		raw := rawExchange(t, in.public, method+" /checkout/1 HTTP/1.1\r\nHost: shop\r\nX-User: alice\r\n"+
			"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 10\r\nConnection: close\r\n\r\nquantity=1")
		answers = append(answers, strings.Join(statusLines(raw), ","))
	}
	if fmt.Sprint(answers) != "[200 409 409]" {
		t.Fatalf("answers %v, want the first admitted and the others refused by the per-user limit", answers)
	}
	seen := origin.requests()
	if len(seen) != 1 || seen[0].method != "POST" {
		t.Fatalf("the shop saw %+v, want one POST", seen)
	}
	r, err := send("GET", in.public+"/_edgeq/products/1", nil)
	if err != nil || !strings.Contains(r.body, `"remaining_stock":4`) {
		t.Fatalf("stock after one admitted checkout: %v %s", err, r.body)
	}
}
