package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/templates"
)

// The names the pow stack configures, handed to pow.mjs in its environment.
const (
	powQueue          = "powdrop"  // turnstile: true: the join form shows the proof of work
	powOtherQueue     = "powother" // another queue with a check: a solution for one does not join it
	powPage           = "/products/2"
	powPageHeading    = "Limited sneaker B"
	powChecked        = "/auctions/42" // routes[].turnstile: true: the challenge page first
	powCheckedHeading = "Signed match ball"
	powTTL            = 10 * time.Second
)

// powConfig is a stack whose bot check is the proof of work, with a small difficulty (the browser
// solves it at once) and the shortest ttl the configuration takes (the expired scenario waits it out).
// Loopback is a trusted proxy, so a scenario can present another visitor with X-Forwarded-For.
func powConfig(t *testing.T) func(origin, ts string) string {
	return func(origin, _ string) string {
		return fmt.Sprintf(`
server: {listen: "127.0.0.1:0", trusted_proxies: ["127.0.0.1/32"]}
admin: {listen: "127.0.0.1:0", api_key: %q}
origin: {url: %q}
redis: {addr: %q, key_prefix: "pow"}
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0, turnstile_per_ip_per_minute: 0}
log: {level: warn}
challenge:
  provider: pow
  pow: {difficulty: 12, ttl: %s}
queues:
  - {id: %s, title: "Sneaker drop", capacity: 50, turnstile: true}
  - {id: %s, title: "Other drop", capacity: 50, turnstile: true}
routes:
  - {name: products, match: "GET /products/{id}", queue: %s}
  - {name: checked, match: "GET %s", turnstile: true}
`, adminKey, origin, storetest.RedisAddr(t), powTTL, powQueue, powOtherQueue, powQueue, powChecked)
	}
}

// runPow runs one scenario of pow.mjs against s.
func runPow(t *testing.T, node string, s *stack, scenario string, extra ...string) {
	t.Helper()
	cmd := exec.Command(node, "pow.mjs", scenario)
	cmd.Env = append(os.Environ(), "EDGEQ_URL="+s.edgeq, "EDGEQ_ADMIN_URL="+s.admin,
		"POW_QUEUE="+powQueue, "POW_OTHER_QUEUE="+powOtherQueue, "POW_PAGE="+powPage, "POW_PAGE_HEADING="+powPageHeading,
		"POW_CHECKED="+powChecked, "POW_CHECKED_HEADING="+powCheckedHeading,
		"POW_TTL_SECONDS="+strconv.Itoa(int(powTTL/time.Second)))
	cmd.Env = append(cmd.Env, extra...)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("pow scenario %s failed: %v", scenario, err)
	}
}

// TestBrowserPow runs the proof-of-work check (challenge.provider pow) in Chromium: static/pow.js and its
// worker solve the join form's and the challenge page's challenges, and the server refuses what must
// not pass. Screenshots go to SCREENSHOT_DIR when it is set.
func TestBrowserPow(t *testing.T) {
	node := requireBrowser(t)
	s := launch(t, powConfig(t))

	t.Run("the join form solves its challenge, shows it, and Join takes a place", func(t *testing.T) {
		runPow(t, node, s, "join")
	})
	t.Run("Join pressed before the answer is in is held and sent with it", func(t *testing.T) {
		runPow(t, node, s, "early")
	})
	t.Run("a challenge left to expire on the page is replaced and solved again before Join", func(t *testing.T) {
		runPow(t, node, s, "renew")
	})
	t.Run("a challenge that cannot be fetched or a worker that cannot start shows the failure", func(t *testing.T) {
		runPow(t, node, s, "failed")
	})
	t.Run("a solution sent twice is refused the second time", func(t *testing.T) {
		runPow(t, node, s, "replay")
	})
	t.Run("a solution sent after the challenge's ttl is refused", func(t *testing.T) {
		runPow(t, node, s, "expired")
	})
	t.Run("a solution from another network, for another queue or scope is refused", func(t *testing.T) {
		runPow(t, node, s, "visitor")
	})
	t.Run("without JavaScript the join form says the check needs it", func(t *testing.T) {
		runPow(t, node, s, "nojs")
	})
	t.Run("a checked route: the challenge page solves and lands on the shop page", func(t *testing.T) {
		runPow(t, node, s, "route")
	})
	t.Run("axe: the join form and the challenge page in every language, running and done (dark too in en, ar, he)", func(t *testing.T) {
		runPow(t, node, s, "axe", "LANGS="+strings.Join(templates.Languages, ","))
	})
}
