package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// edgeq check warns when a stock or bid route gives units back on a timeout (the shop may have sold
// them: docs/reference.md "Admission outcomes"), and only then.
func TestCheck_WarnsWhenAnAdmissionRouteReleasesOnTimeout(t *testing.T) {
	const warning = "release_on names timeout"
	for _, c := range []struct {
		name, admission string
		warns           bool
	}{
		{"stock, timeout", `{type: stock, product: "path:p", user: "header:X-User", release_on: ["5xx", "error", "timeout"]}`, true},
		{"bid, timeout", `{type: bid, auction: "path:p", amount: "form:amount", user: "header:X-User", release_on: ["timeout"]}`, true},
		{"stock, the default", `{type: stock, product: "path:p", user: "header:X-User"}`, false},
		{"stock, error only", `{type: stock, product: "path:p", user: "header:X-User", release_on: ["4xx", "5xx", "error"]}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "edgeq.yaml")
			os.WriteFile(path, []byte(fmt.Sprintf(`
origin: {url: "http://127.0.0.1:1"}
products: [{id: shoe, stock: 10}]
auctions: [{id: lot, starting_price: "1.00", min_increment: "1.00", ends_at: "2099-01-01T00:00:00Z"}]
routes:
  - name: buy
    match: "POST /buy/{p}"
    admission: %s
`, c.admission)), 0o600)
			problems, warnings, err := Check(path)
			if err != nil || len(problems) > 0 {
				t.Fatalf("Check: %v %v", err, problems)
			}
			if got := strings.Contains(strings.Join(warnings, "\n"), warning); got != c.warns {
				t.Fatalf("warned %v, want %v: %q", got, c.warns, warnings)
			}
		})
	}
}
