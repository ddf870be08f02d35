package admission

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/edgetest"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// mine asks GET /_edgeq/auctions/mine as user (the bid route's X-User header; "" sends none).
func (st *stack) mine(user, query string) answer {
	st.T.Helper()
	req, _ := http.NewRequest("GET", st.Public.URL+"/_edgeq/auctions/mine"+query, nil)
	req.Header.Set("Accept", "application/json")
	if user != "" {
		req.Header.Set("X-User", user)
	}
	return do(st.T, req)
}

// mineItems is the list's items by auction id.
func mineItems(t *testing.T, a answer) map[string]map[string]any {
	t.Helper()
	if a.Status != 200 {
		t.Fatalf("auctions/mine: %d %s", a.Status, a.Body)
	}
	items, ok := a.JSON["items"].([]any)
	if !ok {
		t.Fatalf("no items: %s", a.Body)
	}
	out := map[string]map[string]any{}
	for _, it := range items {
		m := it.(map[string]any)
		out[m["auction_id"].(string)] = m
	}
	return out
}

// Two bidders on three auctions, one of which ends: each sees only their own bids, with active, won
// or lost and is_highest; a withdrawn bid counts for nothing; nobody's identity is in the answer.
func TestMine_EachBidderSeesTheirOwnAuctions(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) { mineOfEachBidder(t, newStack(t, s)) })
	// With the ledger on, the bids come from it (the store's index keeps a week of them).
	t.Run("ledger", func(t *testing.T) {
		st := newStack(t, storetest.Redis(t))
		withLedger(t, st)
		mineOfEachBidder(t, st)
	})
}

func mineOfEachBidder(t *testing.T, st *stack) {
	soon := auction("soon", "1.00", "1.00", 4*time.Second) // ends in 3 to 4 s (whole seconds)
	st.AddAuctions(auction("lamp", "1.00", "1.00", time.Hour), auction("desk", "1.00", "1.00", time.Hour), soon)
	st.StartWorker() // after the auctions: it lists their streams when it starts
	for _, b := range []struct{ auction, user, amount string }{
		{"lamp", "Alice", "10.00"}, {"lamp", "bob", "11.00"}, {"lamp", "alice", "12.00"},
		{"desk", "bob", "10.00"},
		{"soon", "alice", "10.00"}, {"soon", "bob", "11.00"},
	} {
		if a := st.Bid(b.auction, b.user, b.amount); a.Status != 200 {
			t.Fatalf("%+v: %d %s", b, a.Status, a.Body)
		}
	}
	// Alice's bid on the desk is refused by the shop (strict route: 4xx withdraws): it is gone.
	st.Status.Store(409)
	if a := st.BidOn("/strict/auctions/", "desk", "alice", "20.00"); a.Status != 409 {
		t.Fatalf("withdrawn bid: %d %s", a.Status, a.Body)
	}
	st.Status.Store(200)
	// The worker records every bid (7, the withdrawal included) in each bidder's index.
	eventually(t, 10*time.Second, "bids recorded", func() bool {
		return num(st.mine("alice", "").JSON["total_count"]) == 2 && num(st.mine("bob", "").JSON["total_count"]) == 3 &&
			strings.Contains(st.AdminGet("/api/users/alice/bids").Body, "withdrawn")
	})

	alice := mineItems(t, st.mine("alice", ""))
	if l := alice["lamp"]; l["status"] != "active" || l["is_highest"] != true || l["amount"] != "12.00" || num(l["bid_count"]) != 2 ||
		l["highest_amount"] != "12.00" {
		t.Errorf("alice's lamp: %v", l)
	}
	if _, ok := alice["desk"]; ok {
		t.Errorf("alice's only desk bid was withdrawn, yet the desk is listed: %v", alice["desk"])
	}
	beforeEnd := time.Until(soon.EndsAt) > 200*time.Millisecond
	bob := mineItems(t, st.mine("BOB", "")) // normalised like the bid route's user
	if l := bob["lamp"]; l["status"] != "active" || l["is_highest"] != false || l["amount"] != "11.00" || num(l["bid_count"]) != 1 ||
		l["highest_amount"] != "12.00" {
		t.Errorf("bob's lamp: %v", l)
	}
	if d := bob["desk"]; d["status"] != "active" || d["is_highest"] != true || d["amount"] != "10.00" || d["highest_amount"] != "10.00" {
		t.Errorf("bob's desk (alice's higher bid was withdrawn): %v", d)
	}
	if s := bob["soon"]; beforeEnd && (s["status"] != "active" || s["is_highest"] != true) {
		t.Errorf("bob's soon before the end: %v", s)
	}

	time.Sleep(time.Until(soon.EndsAt) + 50*time.Millisecond)
	alice = mineItems(t, st.mine("alice", ""))
	bob = mineItems(t, st.mine("bob", ""))
	if a, b := alice["soon"], bob["soon"]; a["status"] != "lost" || a["is_highest"] != false || b["status"] != "won" ||
		b["is_highest"] != true || a["ends_at"] != soon.EndsAt.Format(time.RFC3339) {
		t.Errorf("after the end: alice %v, bob %v", a, b)
	}
	for user, filters := range map[string]map[string][]string{
		"alice": {"active": {"lamp"}, "won": {}, "lost": {"soon"}},
		"bob":   {"active": {"desk", "lamp"}, "won": {"soon"}, "lost": {}},
	} {
		for status, want := range filters {
			a := st.mine(user, "?status="+status)
			got := mineItems(t, a)
			if len(got) != len(want) || num(a.JSON["total_count"]) != int64(len(want)) {
				t.Errorf("%s status=%s: %s, want %v", user, status, a.Body, want)
			}
			for _, id := range want {
				if got[id]["status"] != status {
					t.Errorf("%s status=%s: %s missing: %s", user, status, id, a.Body)
				}
			}
		}
	}

	// Nobody's identity: not the other bidder's, not the bidder's own, raw or pseudonymised.
	for _, user := range []string{"alice", "bob"} {
		body := st.mine(user, "").Body
		for _, secret := range []string{"alice", "bob", "Alice", st.svc.pseudonyms.of("alice"), st.svc.pseudonyms.of("bob"), "bidder"} {
			if strings.Contains(body, secret) {
				t.Errorf("%s's list carries %q: %s", user, secret, body)
			}
		}
	}
	if a := st.mine("carol", ""); a.Status != 200 || num(a.JSON["total_count"]) != 0 || a.Body == "" || !strings.Contains(a.Body, `"items":[]`) {
		t.Errorf("a bidder without bids: %d %s", a.Status, a.Body)
	}
}

// The list is paginated like the admin lists; a bad status or page, or no identity, is 400; without
// a bid route there is nothing to identify bidders by (404).
func TestMine_PagingAndRefusals(t *testing.T) {
	st := newStack(t, storetest.Redis(t))
	for i := range 5 {
		st.AddAuctions(auction(fmt.Sprintf("lot%d", i), "1.00", "1.00", time.Hour))
	}
	st.StartWorker()
	for i := range 5 {
		if a := st.Bid(fmt.Sprintf("lot%d", i), "dave", "5.00"); a.Status != 200 {
			t.Fatal(a.Body)
		}
	}
	eventually(t, 10*time.Second, "bids recorded", func() bool { return num(st.mine("dave", "").JSON["total_count"]) == 5 })
	var seen []string
	for page := 1; page <= 3; page++ {
		a := st.mine("dave", fmt.Sprintf("?page=%d&page_size=2", page))
		items, _ := a.JSON["items"].([]any)
		if a.Status != 200 || num(a.JSON["total_count"]) != 5 || num(a.JSON["page"]) != int64(page) || num(a.JSON["page_size"]) != 2 ||
			len(items) != min(2, 5-2*(page-1)) {
			t.Fatalf("page %d: %s", page, a.Body)
		}
		for _, it := range items {
			seen = append(seen, it.(map[string]any)["auction_id"].(string))
		}
	}
	// Newest bid first.
	if strings.Join(seen, ",") != "lot4,lot3,lot2,lot1,lot0" {
		t.Fatalf("pages: %v", seen)
	}
	if a := st.mine("dave", "?page=4&page_size=2"); a.Status != 200 || len(a.JSON["items"].([]any)) != 0 {
		t.Fatalf("past the end: %s", a.Body)
	}
	for query, field := range map[string]string{"?status=open": "status", "?status=WON": "status", "?page=0": "page", "?page_size=101": "page_size"} {
		if a := st.mine("dave", query); a.Status != 400 || a.JSON["error"] != "INVALID_REQUEST" || a.JSON["field"] != field {
			t.Errorf("%s: %d %s", query, a.Status, a.Body)
		}
	}
	if a := st.mine("", ""); a.Status != 400 || a.JSON["error"] != "INVALID_REQUEST" || a.JSON["field"] != "user" {
		t.Errorf("no identity: %d %s", a.Status, a.Body)
	}

	// The first bid route decides: a route identifying bidders by a form field reads it from the query.
	byForm := config.Route{Name: "form-bid", Match: "POST /f/{id}", Admission: config.Admission{Type: "bid", Own: map[string]string{"auction": "path:id", "amount": "form:amount"}, User: "form:customer"}}
	if err := st.svc.UseIdentities([]config.Route{{Name: "browse", Match: "GET /"}, byForm, edgetest.Routes()[4]}); err != nil {
		t.Fatal(err)
	}
	if a := st.mine("", "?customer=Dave"); num(a.JSON["total_count"]) != 5 {
		t.Errorf("identified by the query: %d %s", a.Status, a.Body)
	}
	if a := st.mine("dave", ""); a.Status != 400 || a.JSON["field"] != "user" {
		t.Errorf("the header of a later bid route is not used: %d %s", a.Status, a.Body)
	}
	if err := st.svc.UseIdentities(nil); err != nil {
		t.Fatal(err)
	}
	if a := st.mine("dave", ""); a.Status != 404 {
		t.Errorf("without a bid route: %d %s", a.Status, a.Body)
	}
}
