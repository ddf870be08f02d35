package ledger_test

import (
	"context"
	"sync"
	"testing"

	"github.com/edgeq/edgeq/internal/ledger"
	"github.com/edgeq/edgeq/internal/testutil/ledgertest"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func open(t *testing.T, url string) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// Migrations run once: a second Open (another replica, a restart) finds the schema in place, and
// replicas opening together do not race (the advisory lock).
func TestOpen_MigratesOnceEvenWhenReplicasStartTogether(t *testing.T) {
	url := ledgertest.Database(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			l, err := ledger.Open(context.Background(), url)
			if err == nil {
				l.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	l := open(t, url)
	if v, err := l.Version(context.Background()); err != nil || v != 1 {
		t.Fatalf("schema version %d, %v; want 1", v, err)
	}
}
