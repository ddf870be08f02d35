// Package ledgertest gives tests a real PostgreSQL: one private server per test package (started on
// first use, stopped by storetest.Main) and an empty database of its own for every caller.
//
// Without PostgreSQL installed, tests fail with a clear message when the CI environment variable is
// set, and are skipped with that message otherwise.
package ledgertest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/ledger/pgserver"
	"github.com/edgeq/edgeq/internal/store/storetest"
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
	if errors.Is(shared.err, pgserver.ErrNotInstalled) {
		if storetest.InCI() {
			t.Fatalf("ledgertest: %v, but CI is set: the ledger is tested on a real PostgreSQL (.ci/run installs it)", shared.err)
		}
		t.Skipf("ledgertest: %v; the ledger tests need it (with CI=true this is an error)", shared.err)
	}
	if shared.err != nil {
		t.Fatalf("ledgertest: %v", shared.err)
	}
	return shared.server
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
