package stock

import (
	"context"
	"testing"

	"github.com/edgeq/edgeq/admission/stock/products"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/ids"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/admissiontest"
	"github.com/edgeq/edgeq/internal/testutil/edgetest"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// stack is edgeq with admission in front of a counting origin (edgetest.Stack), its service, and the
// ids of the admissions the tests make themselves.
type stack struct {
	*edgetest.Stack
	svc *admission.Service
	ids *ids.Generator
}

// The stack's helpers, under the names these tests use.
var (
	product = edgetest.Product
	num     = edgetest.Num
	do      = edgetest.Do
)

func newStack(t *testing.T, s *store.Store, products ...products.Product) *stack {
	t.Helper()
	e := edgetest.New(t, s, edgetest.Options{Build: admissiontest.Build(nil), Products: products})
	// A node of their own: the service's ids (node 1) never meet them.
	return &stack{Stack: e, svc: e.Svc.(*admission.Service), ids: ids.New(1000)}
}

// kind is the stack's stock kind.
func (st *stack) kind() *stockKind { return st.svc.Kind(products.Kind).(*stockKind) }

// nextID is an admission id for a claim the test makes itself.
func (st *stack) nextID() string { return st.ids.NextString() }

// pseudonym is what the store keeps of user.
func (st *stack) pseudonym(user string) string {
	st.T.Helper()
	p, e := st.svc.Pseudonym(user, "")
	if e != nil {
		st.T.Fatal(e)
	}
	return p
}

func (st *stack) remaining(product string) int64 {
	st.T.Helper()
	n, err := st.Store.Client.Get(context.Background(), stockKey(st.Store.Keys, product)).Int64()
	if err != nil {
		st.T.Fatal(err)
	}
	return n
}

// storedRecord reads an admission's record as the scripts keep it (admission/records.go): the zero
// record when there is none.
func storedRecord(t *testing.T, s *store.Store, product, id string) storeRecord {
	t.Helper()
	v, err := s.Client.HGet(context.Background(), recordsKey(s.Keys, product, id), id).Result()
	if err != nil {
		return storeRecord{}
	}
	return parseStoreRecord(v)
}
