// Package ledgertest gives tests a real PostgreSQL: one private server per test package (started on
// first use, stopped by storetest.Main) and an empty database of its own for every caller.
//
// Without PostgreSQL installed, tests fail with a message that says what to install: the ledger has
// no stand-in, and a skipped ledger test would pass for a tested one.
package ledgertest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

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
