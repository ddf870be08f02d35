package admission

import (
	"net/http"
	"strings"
	"testing"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/visitor"
)

// visitorCheckout posts to the route with user: visitor, carrying header (a cookie, an Edgeq-Visitor
// header, or nothing).
func (st *stack) visitorCheckout(product string, header http.Header) answer {
	st.T.Helper()
	req, _ := http.NewRequest("POST", st.Public.URL+"/visitor/checkout/"+product, nil)
	req.Header.Set("Accept", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	return do(st.T, req)
}

// Under user: visitor one browser is one buyer, whether it sends its id as the cookie or as the
// Edgeq-Visitor header: its second purchase is refused ALREADY_PURCHASED and never reaches the shop;
// another visitor still buys.
func TestStock_VisitorBuysOnceWhateverItSendsItsIDIn(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("hoodie", 10, 1))
		_, browser := st.Visitors.Mint()
		if a := st.visitorCheckout("hoodie", http.Header{"Cookie": {visitor.Cookie + "=" + browser}}); a.Status != 200 {
			t.Fatalf("first purchase: %d %s", a.Status, a.Body)
		}
		for _, again := range []http.Header{{"Cookie": {visitor.Cookie + "=" + browser}}, {visitor.Header: {browser}}} {
			if a := st.visitorCheckout("hoodie", again); a.Status != 409 || a.JSON["error"] != "ALREADY_PURCHASED" {
				t.Fatalf("the same visitor again (%v): %d %s", again, a.Status, a.Body)
			}
		}
		_, other := st.Visitors.Mint()
		if a := st.visitorCheckout("hoodie", http.Header{visitor.Header: {other}}); a.Status != 200 {
			t.Fatalf("another visitor: %d %s", a.Status, a.Body)
		}
		if st.Hits.Load() != 2 || st.remaining("hoodie") != 8 {
			t.Fatalf("origin hits %d, remaining %d; want 2 and 8", st.Hits.Load(), st.remaining("hoodie"))
		}
	})
}

// A request without a visitor id edgeq signed (none, forged, tampered with) is refused before anything
// is reserved: 400 with a message that says what to do, nothing taken, the shop not contacted; the
// answer brings a new id to try again with.
func TestStock_WithoutAVisitorIDNothingIsTaken(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("hoodie", 10, 1))
		_, genuine := st.Visitors.Mint()
		tampered := genuine[:len(genuine)-1] + "0" // a digit of its MAC changed
		if tampered == genuine {
			tampered = genuine[:len(genuine)-1] + "1"
		}
		_, foreign := visitor.New([]byte("another key")).Mint()
		for name, header := range map[string]http.Header{
			"none":        nil,
			"another key": {visitor.Header: {foreign}},
			"tampered":    {"Cookie": {visitor.Cookie + "=" + tampered}},
		} {
			a := st.visitorCheckout("hoodie", header)
			msg, _ := a.JSON["message"].(string)
			if a.Status != 400 || a.JSON["error"] != "INVALID_REQUEST" || a.JSON["field"] != "user" || !strings.Contains(msg, visitor.Header) {
				t.Fatalf("%s: %d %s", name, a.Status, a.Body)
			}
			if _, ok := st.Visitors.Check(a.Header.Get(visitor.Header)); !ok {
				t.Fatalf("%s: no new visitor id with the refusal: %v", name, a.Header)
			}
		}
		if st.Hits.Load() != 0 || st.remaining("hoodie") != 10 {
			t.Fatalf("origin hits %d, remaining %d; want nothing taken", st.Hits.Load(), st.remaining("hoodie"))
		}
	})
}
