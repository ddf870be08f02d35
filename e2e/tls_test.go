package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/testutil/testcert"
)

// TestBrowserOverTLS: edgeq alone at the edge. Chromium, trusting the test's certificate by its key
// (not by turning certificate checks off), reaches the TLS listener over HTTP/2, waits on the waiting
// page, is let in and buys a jersey through the shop's own page script; curl does the same over
// HTTP/2 when it is installed.
func TestBrowserOverTLS(t *testing.T) {
	node := requireBrowser(t)
	t.Parallel()
	ca := testcert.NewCA(t)
	leaf := ca.Issue(t, testcert.Options{})
	certFile, keyFile := leaf.Files(t, t.TempDir(), "edge")
	s := launch(t, func(origin, _ string) string {
		return fmt.Sprintf(`
server:
  listen: "127.0.0.1:0"
  tls:
    listen: "127.0.0.1:0"
    certificates: [{cert_file: %q, key_file: %q}]
    hsts: "max-age=300"
admin: {listen: "127.0.0.1:0", api_key: %q}
origin: {url: %q}
redis: {addr: %q, key_prefix: "overtls"}
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
log: {level: warn}
queues:
  - {id: door, title: "Over TLS", capacity: 1}
products:
  - {id: "jersey", stock: 50, per_user_limit: 1, name: "Team jersey"}
routes:
  - {name: pages, match: "GET /p/{slug}", queue: door}
  - name: add_to_cart
    match: "POST /api/carts/{cart}/items"
    queue: door
    admission: {type: stock, unknown_product: pass, product: "json:sku", quantity: "json:quantity", user: token, release_on: ["4xx", "5xx", "error"]}
  - {name: checkout, match: "POST /api/carts/{cart}/checkout", queue: door, complete_on: ["2xx"]}
`, certFile, keyFile, adminKey, origin, storetest.RedisAddr(t))
	})
	if s.tls == "" {
		t.Fatal("no TLS listener")
	}

	curl, err := exec.LookPath("curl")
	switch {
	case err != nil && storetest.InCI():
		t.Fatal("this test needs curl (apt-get install curl); .ci/run installs it")
	case err != nil:
		t.Log("curl is not installed: its HTTP/2 request is left out (outside CI)")
	default:
		out, err := exec.Command(curl, "--http2", "-k", "-sS", "-o", "/dev/null", "-D", "-", s.tls+"/_edgeq/products/jersey").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "HTTP/2 200") || !strings.Contains(strings.ToLower(string(out)), "strict-transport-security: max-age=300") {
			t.Fatalf("curl --http2: %v\n%s", err, out)
		}
		t.Logf("curl --http2: %s", strings.SplitN(string(out), "\n", 2)[0])
	}

	holder := s.hold(t, "door", nil)
	runScenario(t, node, s, "overTLS", "HOLDER="+holder, "EDGEQ_TLS_URL="+s.tls, "SPKI="+leaf.SPKIHash())
}
