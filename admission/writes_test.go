package admission

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeq/edgeq/admission/stock/products"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/ids"
	"github.com/edgeq/edgeq/internal/ledger"
	"github.com/edgeq/edgeq/internal/testutil/ledgertest"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// writeCalls counts the write commands a redis-server has run so far, by name (INFO commandstats,
// where a command a script calls counts under its own name; a command is a write when COMMAND INFO
// flags it so).
func writeCalls(t *testing.T, c redis.UniversalClient) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	text, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	commands, err := c.Command(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int64{}
	for _, line := range strings.Split(text, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		if strings.Contains(name, "|") {
			continue // subcommands (CONFIG|RESETSTAT, XGROUP|CREATE): setup, not admissions
		}
		if ci := commands[name]; ci == nil || !slices.Contains(ci.Flags, "write") {
			continue
		}
		for _, field := range strings.Split(rest, ",") {
			if k, v, _ := strings.Cut(field, "="); k == "calls" {
				calls[name], _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return calls
}

// A hot product's shard is the ceiling of a sale: what one admission writes there, with everything
// that follows it (the commit once the shop accepts, the event worker's admin records and indexes),
// stays within 5 write commands, amortized over a batch of 100 admissions of new buyers as a replica
// sends them under load (reserve calls of 10 purchases, each carrying the commits of the call before,
// one pass of the worker), on
// a real redis-server. Writes are counted by Redis itself (INFO commandstats: each command a script
// calls counts), with the ledger off and on (then the commits' events and the ledger worker's
// acknowledgements count too).
func TestStockAdmission_AtMostFiveRedisWritesEachAmortizedOverABatch(t *testing.T) {
	for _, ledgerOn := range []bool{false, true} {
		t.Run(fmt.Sprintf("ledger=%v", ledgerOn), func(t *testing.T) {
			s := storetest.Redis(t)
			ctx := context.Background()
			o := Options{Store: s, IDs: ids.New(1), IdentityKey: []byte("k"), ClaimTTL: time.Minute,
				Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()}
			if ledgerOn {
				l, err := ledger.Open(ctx, ledgertest.Database(t))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(l.Close)
				o.Ledger = l
			}
			svc := New(o)
			if err := svc.Apply(ctx, products.With(&config.Config{}, product("p", 1<<40, 1)), nil); err != nil {
				t.Fatal(err)
			}
			w := &worker{s: svc, consumer: "test", groups: map[string]bool{}}
			lw := &ledgerWorker{s: svc, consumer: "test", groups: map[string]bool{}}
			w.claimAt, lw.claimAt = time.Now().Add(time.Hour), time.Now().Add(time.Hour) // the take-over sweeps are not per admission
			drain := func() {
				for f := foundSome; f != foundNothing; f, _ = w.pass(ctx) {
				}
				for f := foundSome; ledgerOn && f != foundNothing; f, _ = lw.pass(ctx) {
				}
			}
			// A batch as a replica sends it under load: reserve calls of 10 purchases, each carrying
			// the commits of the call before (committer.go: a commit rides the product's next
			// reservation call), the last commits in a call of their own.
			batch := func(from, n int) {
				var commits []Claim
				for g := 0; g <= n/10; g++ {
					var claims []Claim
					if g < n/10 {
						for i := range 10 {
							n := strconv.Itoa(from + g*10 + i)
							claims = append(claims, Claim{Owner: "p", User: svc.pseudonyms.of("buyer-" + n), ID: svc.o.IDs.NextString(), Value: 1})
						}
					}
					res, err := reserveNow(ctx, svc, "p", append(commits, claims...))
					if err != nil {
						t.Fatal(err)
					}
					commits = commits[:0]
					for i, r := range res[len(res)-len(claims):] {
						if r.code != 0 {
							t.Fatalf("admission %s refused: %d", claims[i].ID, r.code)
						}
						c := claims[i]
						c.Commit = true
						commits = append(commits, c)
					}
				}
			}
			// A first batch creates what is created once (the streams' groups, the indexes).
			batch(1, 100)
			drain()
			before := writeCalls(t, s.Client)
			batch(101, 100)
			drain()
			after := writeCalls(t, s.Client)

			var total int64
			var by []string
			for name, n := range after {
				if d := n - before[name]; d > 0 {
					total += d
					by = append(by, fmt.Sprintf("%s %.2f", name, float64(d)/100))
				}
			}
			slices.Sort(by)
			t.Logf("write commands per admission: %.2f (%s)", float64(total)/100, strings.Join(by, ", "))
			if total > 5*100 {
				t.Errorf("100 admissions wrote %d commands, %.2f each (%s); at most 5 each", total, float64(total)/100, strings.Join(by, ", "))
			}
			// What the batch did is all there: the units sold, none left unsettled, every record applied.
			if left := s.Client.ZCard(ctx, groupedOf(svc).UnsettledSet("p")).Val(); left != 0 {
				t.Errorf("%d admissions left unsettled", left)
			}
			if n := indexedCount(t, svc); n != 200 {
				t.Errorf("the admin index holds %d admissions, want 200", n)
			}
		})
	}
}
