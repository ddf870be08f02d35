package e2e

import (
	"fmt"
	"testing"

	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// TestBrowserNoShows: a visitor who closed the waiting page frees its place within seconds of being
// reached, one whose page is in the background keeps it for minutes, and a pre-queue's lottery moves
// on past the drawn visitors who left. It runs beside the other browser tests, on an edgeq and keys of
// its own: the background page is watched for over five minutes.
func TestBrowserNoShows(t *testing.T) {
	node := requireBrowser(t)
	t.Parallel()
	s := launch(t, func(origin, _ string) string {
		return fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: %q}
origin: {url: %q}
redis: {addr: %q, key_prefix: "noshows"}
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
log: {level: warn}
queues:
  # gone_after is the default (10s) on both.
  - {id: door, title: "Closed pages", capacity: 1}
  - {id: bg, title: "Background pages", capacity: 1, position_expiry: 6m}
`, adminKey, origin, storetest.RedisAddr(t))
	})
	t.Run("a page in the background keeps its place for over five minutes", func(t *testing.T) {
		t.Parallel()
		holder := s.hold(t, "bg", nil)
		runScenario(t, node, s, "background", "HOLDER="+holder)
	})
	t.Run("a closed page frees its place within 15 s of its turn; a lottery moves on past those who left", func(t *testing.T) {
		t.Parallel()
		holder := s.hold(t, "door", nil)
		runScenario(t, node, s, "closed", "HOLDER="+holder)
		runScenario(t, node, s, "drawnAndGone")
	})
}
