// Package ledgertest gives tests a real PostgreSQL: one private server per test package (started on
// first use, stopped by storetest.Main) and an empty database of its own for every caller.
//
// Without PostgreSQL installed, tests fail with a message that says what to install: the ledger has
// no stand-in, and a skipped ledger test would pass for a tested one.
package ledgertest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/ledger"
	"github.com/edgeq/edgeq/internal/testutil/pgserver"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

var shared struct {
	once   sync.Once
	server *pgserver.Server
	err    error
}

// Server returns the package's private PostgreSQL server, starting it on first use.
func Server(t testing.TB) *pgserver.Server {
	t.Helper()
	shared.once.Do(func() {
		shared.server, shared.err = pgserver.Start()
		if shared.err == nil {
			storetest.AtExit(shared.server.Close)
		}
	})
	usable(t, shared.err)
	return shared.server
}

// PrivateServer starts a PostgreSQL server of the caller's own, closed when the test ends: for a test
// that stops and starts it.
func PrivateServer(t testing.TB) *pgserver.Server {
	t.Helper()
	srv, err := pgserver.Start()
	usable(t, err)
	t.Cleanup(srv.Close)
	return srv
}

// usable ends the test when the server could not start, saying what to install when that is why.
func usable(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, pgserver.ErrNotInstalled) {
		t.Fatalf("ledgertest: %v: the ledger is tested on a real PostgreSQL (apt-get install postgresql; .ci/run installs it)", err)
	}
	if err != nil {
		t.Fatalf("ledgertest: %v", err)
	}
}

// Database returns the URL of a new, empty database on the package's private server.
func Database(t testing.TB) string {
	t.Helper()
	srv := Server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url, err := srv.NewDatabase(ctx)
	if err != nil {
		t.Fatalf("ledgertest: create a database: %v", err)
	}
	return url
}

// WriteInAnyOrder writes a table's events in a random order, repeats included, in the way of round:
// even rounds one batch per event, each with the event twice; odd rounds every event in one batch,
// written twice. It returns the order, for the test's messages; what the rows then hold is the test's
// to check (the same whatever the order).
func WriteInAnyOrder(t testing.TB, l *ledger.Ledger, events []ledger.Row, round int) []int {
	t.Helper()
	ctx := context.Background()
	order := rand.Perm(len(events))
	var all ledger.Batch
	for _, j := range order {
		all.Rows = append(all.Rows, events[j])
		if round%2 == 0 {
			if err := l.Write(ctx, ledger.Batch{Rows: []ledger.Row{events[j], events[j]}}); err != nil {
				t.Fatalf("order %v: %v", order, err)
			}
		}
	}
	for range round % 2 * 2 {
		if err := l.Write(ctx, all); err != nil {
			t.Fatalf("order %v: %v", order, err)
		}
	}
	return order
}

// Open opens a ledger on a new, empty database (Database), closed when the test ends.
func Open(t testing.TB) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(context.Background(), Database(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}
