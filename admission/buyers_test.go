package admission

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/edgetest"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// myAdmissions asks GET /_edgeq/admissions/mine as user (the checkout route's X-User header).
func (st *stack) myAdmissions(user, query string) answer {
	st.T.Helper()
	req, _ := http.NewRequest("GET", st.Public.URL+"/_edgeq/admissions/mine?"+query, nil)
	if user != "" {
		req.Header.Set("X-User", user)
	}
	return do(st.T, req)
}

// A buyer lists their own admissions, identified like the first
// stock route's user, and sees nobody else's; a cancelled one shows as cancelled; paging; without an
// identity 400; without a stock route 404. With the ledger on, the same list comes from it.
func TestMyAdmissions_EachBuyerSeesTheirOwn(t *testing.T) {
	check := func(t *testing.T, st *stack, ledgerOn bool) {
		bought := map[string][]string{}
		for i, b := range []struct{ user, product string }{
			{"ann", "p"}, {"ben", "p"}, {"ann", "q"}, {"Ann", "r"}, {"cat", "q"},
		} {
			a := st.Checkout(b.product, b.user, url.Values{"quantity": {"1"}})
			if a.Status != 200 {
				t.Fatalf("purchase %d: %d %s", i, a.Status, a.Body)
			}
			user := strings.ToLower(b.user)
			bought[user] = append(bought[user], strings.TrimPrefix(a.Body, "origin took admission "))
		}
		eventually(t, 10*time.Second, "purchases recorded", func() bool {
			return num(st.myAdmissions("ann", "").JSON["total_count"]) == 3 && num(st.myAdmissions("cat", "").JSON["total_count"]) == 1
		})
		eventually(t, 10*time.Second, "ben's cancellation", func() bool {
			return st.AdminSend("POST", "/api/admissions/"+bought["ben"][0]+"/cancel", "", "").Status == 200
		})
		eventually(t, 10*time.Second, "the cancellation recorded", func() bool {
			items, _ := st.myAdmissions("ben", "").JSON["items"].([]any)
			return len(items) == 1 && items[0].(map[string]any)["state"] == "cancelled"
		})
		ann := st.myAdmissions("ANN", "page_size=2")
		items, _ := ann.JSON["items"].([]any)
		if ann.Status != 200 || num(ann.JSON["total_count"]) != 3 || len(items) != 2 {
			t.Fatalf("ann's first page: %d %s", ann.Status, ann.Body)
		}
		// Newest first: r, then q; the second page has p.
		if items[0].(map[string]any)["product_id"] != "r" || items[1].(map[string]any)["product_id"] != "q" {
			t.Fatalf("ann's order: %s", ann.Body)
		}
		second, _ := st.myAdmissions("ann", "page=2&page_size=2").JSON["items"].([]any)
		if len(second) != 1 || second[0].(map[string]any)["id"] != bought["ann"][0] {
			t.Fatalf("ann's second page: %v", second)
		}
		for _, id := range append(bought["ben"], bought["cat"]...) {
			if strings.Contains(ann.Body, id) {
				t.Fatalf("ann sees another buyer's admission %s: %s", id, ann.Body)
			}
		}
		if strings.Contains(ann.Body, `"user"`) || strings.Contains(ann.Body, st.svc.pseudonyms.of("ann")) {
			t.Fatalf("the list shows the buyer's pseudonym: %s", ann.Body)
		}
		want := "admitted"
		if ledgerOn {
			want = "committed" // only the ledger records the settlement
		}
		if items[0].(map[string]any)["state"] != want {
			t.Fatalf("state %v, want %s", items[0], want)
		}
		if a := st.myAdmissions("", ""); a.Status != 400 || a.JSON["error"] != "INVALID_REQUEST" {
			t.Fatalf("no identity: %d %s", a.Status, a.Body)
		}
		if a := st.myAdmissions("ann", "page_size=0"); a.Status != 400 {
			t.Fatalf("page_size=0: %d", a.Status)
		}
	}
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 10, 1), product("q", 10, 1), product("r", 10, 1))
		st.StartWorker()
		check(t, st, false)
		if err := st.svc.UseIdentities([]config.Route{edgetest.Routes()[4]}); err != nil { // a bid route alone
			t.Fatal(err)
		}
		if a := st.myAdmissions("ann", ""); a.Status != 404 {
			t.Fatalf("without a stock route: %d %s", a.Status, a.Body)
		}
	})
	t.Run("ledger", func(t *testing.T) {
		st := newStack(t, storetest.Redis(t), product("p", 10, 1), product("q", 10, 1), product("r", 10, 1))
		withLedger(t, st)
		st.StartWorker()
		check(t, st, true)
	})
}
