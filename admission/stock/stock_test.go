package stock

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"testing"

	"github.com/edgeq/edgeq/admission/stock/products"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// Release and commit happen once: a second release of an admission changes nothing.
func TestStock_ReleaseIsIdempotent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("p", 5, 2))
		ctx := context.Background()
		user := st.pseudonym("u")
		keys := stockKeys(s.Keys, "p", "42")
		res, err := st.kind().reserveNow(ctx, "p", []admission.Claim{{Owner: "p", User: user, ID: "42", Value: 2}})
		if err != nil || res[0].Code != 0 || res[0].Remaining != 3 {
			t.Fatalf("reserve: %v %v", res, err)
		}
		for i, want := range []int64{0, 2, 2} {
			res, err := releaseScript.Run(ctx, s.Client, keys, "42", 60).Int64Slice()
			if err != nil || res[0] != want {
				t.Fatalf("release %d: %v %v", i, res, err)
			}
		}
		if r := st.remaining("p"); r != 5 {
			t.Fatalf("remaining %d after releases", r)
		}
		if n, _ := s.Client.HLen(ctx, buyersKey(s.Keys, "p")).Result(); n != 0 {
			t.Fatalf("buyer records left: %d", n)
		}
		if code, _ := commitScript.Run(ctx, s.Client, keys, "42", "0").Int(); code != 2 {
			t.Fatalf("commit after release: %d", code)
		}
	})
}

func TestAdmin_Products(t *testing.T) {
	storetest.EachWithCluster(t, func(t *testing.T, s *store.Store) {
		st := newStack(t, s, product("cfg", 5, 1))
		js := "application/json"
		a := st.AdminSend("POST", "/api/products", js, `{"id":"new","stock":3,"per_user_limit":2,"name":"New","price":500}`)
		if a.Status != 200 || num(a.JSON["remaining_stock"]) != 3 || num(a.JSON["total_stock"]) != 3 {
			t.Fatalf("create: %d %s", a.Status, a.Body)
		}
		for name, c := range map[string]struct {
			body   string
			status int
		}{
			"exists":        {`{"id":"new","stock":1}`, 409},
			"unknown field": {`{"id":"x","stock":1,"colour":"red"}`, 400},
			"no stock":      {`{"id":"x"}`, 400},
			"bad id":        {`{"id":"x y","stock":1}`, 400},
			"negative":      {`{"id":"x","stock":-1}`, 400},
			"limit 0":       {`{"id":"x","stock":1,"per_user_limit":0}`, 400},
			"wrong type":    {`{"id":"x","stock":"1"}`, 400},
		} {
			if a := st.AdminSend("POST", "/api/products", js, c.body); a.Status != c.status {
				t.Errorf("%s: %d %s", name, a.Status, a.Body)
			}
		}
		if a := st.AdminSend("POST", "/api/products/new/restock", js, `{"amount":7}`); a.Status != 200 || num(a.JSON["remaining_stock"]) != 10 || num(a.JSON["total_stock"]) != 10 {
			t.Fatalf("restock: %d %s", a.Status, a.Body)
		}
		if a := st.AdminSend("POST", "/api/products/new/restock", "application/x-www-form-urlencoded", "amount=1"); a.Status != 200 {
			t.Fatalf("restock by form: %d %s", a.Status, a.Body)
		}
		// JSON whatever the Content-Type: with parameters, and as `curl -d '{...}'` sends it (a form's).
		for _, ct := range []string{"application/json; charset=utf-8", "application/x-www-form-urlencoded", ""} {
			if a := st.AdminSend("POST", "/api/products/new/restock", ct, ` {"amount": 1}`); a.Status != 200 {
				t.Fatalf("restock with JSON as %q: %d %s", ct, a.Status, a.Body)
			}
		}
		for _, body := range []string{`{"amount":0}`, `{"amount":-3}`, `{}`, `{"amount":"2"}`} {
			if a := st.AdminSend("POST", "/api/products/new/restock", js, body); a.Status != 400 {
				t.Errorf("restock %s: %d", body, a.Status)
			}
		}
		if a := st.AdminSend("POST", "/api/products/zzz/restock", js, `{"amount":1}`); a.Status != 404 {
			t.Fatalf("restock unknown: %d", a.Status)
		}
		// Public read, cached briefly, and 404 for unknown products.
		req, _ := http.NewRequest("GET", st.Public.URL+"/_edgeq/products/new", nil)
		if a := do(t, req); a.Status != 200 || num(a.JSON["remaining_stock"]) != 14 || a.JSON["name"] != "New" || len(a.JSON) != 6 {
			t.Fatalf("public product: %d %s", a.Status, a.Body)
		}
		req, _ = http.NewRequest("GET", st.Public.URL+"/_edgeq/products/zzz", nil)
		if a := do(t, req); a.Status != 404 || a.JSON["error"] != "PRODUCT_NOT_FOUND" {
			t.Fatalf("public unknown: %d %s", a.Status, a.Body)
		}
		// The public list for the shop's pages: every product, sorted by id, public fields
		// only, paged; bad paging is 400.
		req, _ = http.NewRequest("GET", st.Public.URL+"/_edgeq/products", nil)
		if a := do(t, req); a.Status != 200 || num(a.JSON["total_count"]) != 2 ||
			a.JSON["items"].([]any)[1].(map[string]any)["id"] != "new" || len(a.JSON["items"].([]any)[1].(map[string]any)) != 6 ||
			num(a.JSON["items"].([]any)[1].(map[string]any)["remaining_stock"]) != 14 {
			t.Fatalf("public list: %d %s", a.Status, a.Body)
		}
		req, _ = http.NewRequest("GET", st.Public.URL+"/_edgeq/products?page_size=1&page=2", nil)
		if a := do(t, req); a.Status != 200 || len(a.JSON["items"].([]any)) != 1 || a.JSON["items"].([]any)[0].(map[string]any)["id"] != "new" {
			t.Fatalf("public list, page 2: %d %s", a.Status, a.Body)
		}
		req, _ = http.NewRequest("GET", st.Public.URL+"/_edgeq/products?page_size=1000", nil)
		if a := do(t, req); a.Status != 400 {
			t.Fatalf("public list, page_size 1000: %d", a.Status)
		}
		if a := st.AdminGet("/api/products"); num(a.JSON["total_count"]) != 2 || len(a.JSON["items"].([]any)) != 2 || num(a.JSON["page_size"]) != 2 {
			t.Fatalf("list: %s", a.Body)
		}
		// Pages of the list, sorted by id.
		for page, id := range []string{"cfg", "new"} {
			a := st.AdminGet(fmt.Sprintf("/api/products?page=%d&page_size=1", page+1))
			items, _ := a.JSON["items"].([]any)
			if a.Status != 200 || len(items) != 1 || items[0].(map[string]any)["id"] != id || num(a.JSON["total_count"]) != 2 ||
				num(a.JSON["page"]) != int64(page+1) || num(a.JSON["page_size"]) != 1 {
				t.Fatalf("list page %d: %s", page+1, a.Body)
			}
		}
		if a := st.AdminGet("/api/products?page=0"); a.Status != 400 || a.JSON["field"] != "page" {
			t.Fatalf("list with page=0: %d %s", a.Status, a.Body)
		}
		// One product, as the list shows it; 404 unknown, 400 malformed.
		list := st.AdminGet("/api/products?page=2&page_size=1").JSON["items"].([]any)[0].(map[string]any)
		if a := st.AdminGet("/api/products/new"); a.Status != 200 || !maps.Equal(a.JSON, list) || num(a.JSON["remaining_stock"]) != 14 {
			t.Fatalf("one product: %d %s, the list has %v", a.Status, a.Body, list)
		}
		if a := st.AdminGet("/api/products/zzz"); a.Status != 404 || a.JSON["error"] != "PRODUCT_NOT_FOUND" {
			t.Fatalf("an unknown product: %d %s", a.Status, a.Body)
		}
		if a := st.AdminGet("/api/products/no%20such"); a.Status != 400 || a.JSON["field"] != "id" {
			t.Fatalf("a malformed id: %d %s", a.Status, a.Body)
		}
		if a := st.AdminSend("DELETE", "/api/products/new", "", ""); a.Status != 200 {
			t.Fatalf("delete: %d", a.Status)
		}
		if a := st.AdminSend("DELETE", "/api/products/new", "", ""); a.Status != 404 {
			t.Fatalf("delete twice: %d", a.Status)
		}
		// Seeding again from the configuration never overwrites live stock.
		st.Checkout("cfg", "someone", nil)
		changed := product("cfg", 500, 2)
		changed.Name = "Renamed"
		if err := st.svc.Apply(context.Background(), products.With(&config.Config{}, changed), products.With(&config.Config{}, product("cfg", 5, 1))); err != nil {
			t.Fatal(err)
		}
		p, _, _ := st.kind().product(context.Background(), "cfg")
		if p.RemainingStock != 4 || p.Name != "Renamed" || p.PerUserLimit != 2 {
			t.Fatalf("after a reseed: %+v", p)
		}
	})
}
