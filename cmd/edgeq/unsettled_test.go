package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/testutil/redisserver"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// A replica SIGKILLed while two admitted purchases are at the shop never
// settles them. Another replica lists them as unsettled; the operator commits one (the shop has the
// order) and cancels the other (it has not: its unit goes back), and the list is empty.
func TestUnsettled_AKilledReplicasAdmissionsAreListedAndResolved(t *testing.T) {
	redisSrv := privateRedis(t)
	arrived := make(chan string, 2)
	stop := make(chan struct{})
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.Header.Get("Edgeq-Admission-Id")
		select { // slow checkouts, still running when their replica dies
		case <-stop:
		case <-r.Context().Done():
		}
	}))
	defer origin.Close()
	defer close(stop)
	path := filepath.Join(t.TempDir(), "edgeq.yaml")
	os.WriteFile(path, []byte(fmt.Sprintf(`
server: {listen: "127.0.0.1:0", shutdown_timeout: 2s}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q, timeout: 60s}
redis: {addr: %q}
queues:
  - {id: drop}
products:
  - {id: shoe, stock: 10, per_user_limit: 1, name: "Shoe"}
routes:
  - name: checkout
    match: "POST /checkout/{product}"
    admission: {type: stock, product: "path:product", user: "header:X-User"}
`, origin.URL, redisSrv.Addr())), 0o644)
	first, _, kill := serveReplica(t, path)
	for _, user := range []string{"ann", "ben"} {
		go func() {
			req, _ := http.NewRequest("POST", "http://"+first+"/checkout/shoe", strings.NewReader(""))
			req.Header.Set("X-User", user)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	ids := []string{<-arrived, <-arrived}
	kill()

	_, admin, _ := serveReplica(t, path)
	api := func(method, path string) (int, map[string]any) {
		req, _ := http.NewRequest(method, "http://"+admin+path, nil)
		req.Header.Set("Authorization", "Bearer test-key")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		raw, _ := io.ReadAll(resp.Body)
		json.Unmarshal(raw, &body)
		return resp.StatusCode, body
	}
	listed := func() map[string]bool {
		code, body := api("GET", "/api/admissions?state=admitted&older_than=0")
		if code != 200 {
			t.Fatalf("unsettled list: %d %v", code, body)
		}
		out := map[string]bool{}
		for _, it := range body["items"].([]any) {
			out[it.(map[string]any)["id"].(string)] = true
		}
		return out
	}
	deadline := time.Now().Add(15 * time.Second)
	for got := listed(); !got[ids[0]] || !got[ids[1]]; got = listed() {
		if time.Now().After(deadline) {
			t.Fatalf("unsettled %v, want both of %v", got, ids)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, _ := api("GET", "/api/admissions?state=admitted&older_than=600"); code != 200 {
		t.Fatalf("older_than: %d", code)
	}
	if code, body := api("GET", "/api/admissions?state=admitted&older_than=600"); len(body["items"].([]any)) != 0 || code != 200 {
		t.Fatalf("admissions older than 10 minutes: %v", body)
	}
	if code, _ := api("GET", "/api/admissions?state=released"); code != 400 {
		t.Fatalf("state=released: %d, want 400", code)
	}
	// The worker records the admissions a moment after: commit and cancel then find them.
	resolve := func(action, id string) map[string]any {
		for time.Now().Before(deadline.Add(15 * time.Second)) {
			code, body := api("POST", "/api/admissions/"+id+"/"+action)
			if code == 200 {
				return body
			}
			if code != 404 {
				t.Fatalf("%s %s: %d %v", action, id, code, body)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("%s %s: the admission was never recorded", action, id)
		return nil
	}
	if body := resolve("commit", ids[0]); body["state"] != "committed" {
		t.Fatalf("commit: %v", body)
	}
	if body := resolve("cancel", ids[1]); body["state"] != "cancelled" || body["remaining_stock"] != float64(9) {
		t.Fatalf("cancel: %v (want 9 left: one sold, one back)", body)
	}
	if got := listed(); len(got) != 0 {
		t.Fatalf("still unsettled: %v", got)
	}
	if code, body := api("POST", "/api/admissions/"+ids[0]+"/cancel"); code != 200 || body["remaining_stock"] != float64(10) {
		t.Fatalf("cancelling the committed one (the shop cancelled the order later): %d %v", code, body)
	}
	if code, _ := api("POST", "/api/admissions/"+ids[1]+"/commit"); code != 409 {
		t.Fatalf("committing a cancelled admission: %d, want 409", code)
	}
	// The report counts the operator's commit as sold (and both cancellations), once each.
	span := "&from=" + time.Now().Add(-time.Hour).UTC().Format(time.RFC3339) + "&to=" + time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	var shoe map[string]any
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		_, rep := api("GET", "/api/report?queue=drop"+strings.ReplaceAll(span, "+", "%2B"))
		products, _ := rep["products"].([]any)
		for _, p := range products {
			if p := p.(map[string]any); p["id"] == "shoe" {
				shoe = p
			}
		}
		if shoe != nil && shoe["sold"] == float64(1) && shoe["cancelled"] == float64(2) {
			return
		}
	}
	t.Fatalf("the report's shoe: %v, want sold 1 (the operator's commit) and cancelled 2", shoe)
}

// privateRedis starts a redis-server of the test's own, with extra arguments; a missing one fails in
// CI, says so elsewhere.
func privateRedis(t *testing.T, extra ...string) *redisserver.Server {
	t.Helper()
	srv, err := redisserver.Start(extra...)
	if errors.Is(err, redisserver.ErrNotInstalled) {
		if storetest.InCI() {
			t.Fatal("this test needs redis-server (apt-get install redis-server)")
		}
		t.Skip("redis-server is not installed; skipped outside CI")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}
