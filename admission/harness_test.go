package admission

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/edgeq/edgeq/admission/bid/auctions"

	"github.com/edgeq/edgeq/admission/stock/products"

	"github.com/edgeq/edgeq/internal/ids"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/edgetest"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/testutil/wait"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// stack is edgeq with admission in front of a counting origin (edgetest.Stack), and its service.
type stack struct {
	*edgetest.Stack
	svc *Service
}

// The stack's helpers, under the names these tests use.
type answer = edgetest.Answer

var (
	do      = edgetest.Do
	auction = edgetest.Auction
	product = edgetest.Product
	num     = edgetest.Num
)

// newService is one replica's admission service, as server builds it.
func newService(d edgetest.Deps) edgetest.Service {
	return New(Options{
		Store: d.Store, IDs: ids.New(d.Node), IdentityKey: []byte("identity"), MaxBodyBytes: 4096, ClaimTTL: time.Minute,
		Prefix: "/_edgeq", Responder: d.Responder, Logger: d.Logger, Registry: d.Registry,
		Backoff:   []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond},
		ClaimIdle: 300 * time.Millisecond,
	})
}

func newStack(t *testing.T, s *store.Store, products ...products.Product) *stack {
	t.Helper()
	return newStackTimeout(t, s, 30*time.Second, products...)
}

// newStackTimeout is newStack with the proxy's origin timeout set.
func newStackTimeout(t *testing.T, s *store.Store, originTimeout time.Duration, products ...products.Product) *stack {
	t.Helper()
	return newStackReleasing(t, s, originTimeout, nil, products...)
}

// newStackReleasing is newStackTimeout with every admission route's release_on set (nil: edgetest.Routes').
func newStackReleasing(t *testing.T, s *store.Store, originTimeout time.Duration, releaseOn []string, products ...products.Product) *stack {
	t.Helper()
	return wrap(edgetest.New(t, s, edgetest.Options{Build: newService, OriginTimeout: originTimeout, ReleaseOn: releaseOn, Products: products}))
}

func wrap(e *edgetest.Stack) *stack { return &stack{Stack: e, svc: e.Svc.(*Service)} }

// replica is another replica in front of st's origin, on st's store (edgetest.Stack.Replica).
func (st *stack) replica(node int64, products ...products.Product) *stack {
	st.T.Helper()
	return wrap(st.Stack.Replica(node, products...))
}

// stockOf is svc's stock kind as the pipeline holds it: a Kind, with its capabilities by assertion.
func stockOf(svc *Service) Kind { return svc.kindOf(products.Kind) }

// groupedOf is svc's stock kind as a GroupedKind: its admissions' stream, unsettled set and claims.
func groupedOf(svc *Service) GroupedKind { return stockOf(svc).(GroupedKind) }

// tableOf is k's admin table (TabledKind).
func tableOf(k Kind) *AdminTable { return k.(TabledKind).AdminTable() }

// bids is the bid kind, its own package linked by kinds_link_test.go.
func (st *stack) bids() Kind { return st.svc.kindOf(auctions.Kind) }

// buyTogether admits purchases of one product in one reserve.lua call, as the reserver groups
// requests that arrive together, and commits them, as a replica does once the shop accepted each: one
// entry of the product's admits stream names them all. It returns their admission ids.
func (st *stack) buyTogether(product string, users []string, qtys []int64) []string {
	st.T.Helper()
	ctx := context.Background()
	claims := make([]Claim, len(users))
	commits := make([]pendingCommit, len(users))
	ids := make([]string, len(users))
	for i, u := range users {
		ids[i] = st.svc.o.IDs.NextString()
		claims[i] = Claim{Owner: product, User: st.svc.pseudonyms.of(u), ID: ids[i], Value: qtys[i]}
		commits[i] = pendingCommit{kind: stockOf(st.svc), c: claims[i], st: &settling{done: make(chan struct{})}}
	}
	res, err := reserveNow(ctx, st.svc, product, claims)
	if err != nil {
		st.T.Fatal(err)
	}
	for i, r := range res {
		if r.code != 0 {
			st.T.Fatalf("purchase %d of %v refused: code %d", i, users, r.code)
		}
	}
	st.svc.applyCommits(ctx, commits)
	return ids
}

func (st *stack) remaining(product string) int64 {
	st.T.Helper()
	n, err := st.Store.Client.Get(context.Background(), stockKey(st.Store.Keys, product)).Int64()
	if err != nil {
		st.T.Fatal(err)
	}
	return n
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	wait.Until(t, within, what, cond)
}

// indexedIDs is every id an owner's admin lists (records.go) hold, of the days within the retention.
func indexedIDs(t testing.TB, svc *Service, table *AdminTable, owner string) []string {
	t.Helper()
	var out []string
	for _, day := range svc.recordDays(time.Now()) {
		ids, err := svc.client.LRange(context.Background(), table.IDs(owner, day), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ids...)
	}
	return out
}

// usersIndexed is the ids an owner's users hash holds, all users together.
func usersIndexed(t testing.TB, svc *Service, table *AdminTable, owner string) map[string][]string {
	t.Helper()
	lists, err := svc.client.HGetAll(context.Background(), table.Users(owner)).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for user, list := range lists {
		out[user] = strings.Fields(list)
	}
	return out
}

// indexedCount is how many ids every product's admin lists hold.
func indexedCount(t testing.TB, svc *Service) int64 {
	t.Helper()
	products, err := svc.client.SMembers(context.Background(), stockOf(svc).OwnersKey()).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range products {
		n += len(indexedIDs(t, svc, tableOf(stockOf(svc)), p))
	}
	return int64(n)
}
