package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeq/edgeq/inflight"
)

// A replica killed with SIGKILL while one of its requests holds the route's
// only slot (max_in_flight: 1) cannot give it back; the slot is free again within the lease time, and
// a request waiting on a second replica gets it then. Both replicas are real edgeq processes on one
// Redis.
func TestMaxInFlight_ASIGKILLedReplicasSlotIsFreeWithinTheLeaseTime(t *testing.T) {
	redisSrv := privateRedis(t)

	arrived := make(chan string, 2)
	stop := make(chan struct{})
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.Header.Get("X-Replica")
		if r.Header.Get("X-Replica") == "first" {
			select { // a slow checkout, still running when its replica dies
			case <-stop:
			case <-r.Context().Done():
			}
		}
		fmt.Fprint(w, "order placed")
	}))
	defer origin.Close()
	defer close(stop)
	path := filepath.Join(t.TempDir(), "edgeq.yaml")
	os.WriteFile(path, []byte(fmt.Sprintf(`
server: {listen: "127.0.0.1:0", shutdown_timeout: 2s}
admin: {listen: "127.0.0.1:0"}
origin: {url: %q, timeout: 60s}
redis: {addr: %q}
routes:
  - {name: checkout, match: "POST /checkout", max_in_flight: 1, hold: 60s}
`, origin.URL, redisSrv.Addr())), 0o644)
	replica := func() (string, func()) {
		public, _, kill := serveReplica(t, path)
		return public, kill
	}
	checkout := func(public, name string, answer chan<- int) {
		req, _ := http.NewRequest("POST", "http://"+public+"/checkout", strings.NewReader("cart=1"))
		req.Header.Set("X-Replica", name)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answer <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answer <- resp.StatusCode
	}

	first, kill := replica()
	second, _ := replica()
	firstAnswer, secondAnswer := make(chan int, 1), make(chan int, 1)
	go checkout(first, "first", firstAnswer)
	if got := <-arrived; got != "first" {
		t.Fatalf("arrived %q", got)
	}
	kill()
	killedAt := time.Now()
	<-firstAnswer // the connection died with the replica
	go checkout(second, "second", secondAnswer)

	select {
	case got := <-arrived:
		took := time.Since(killedAt)
		// The dead replica renewed its lease at most Lease/5 before it died, so the slot was held for
		// at least 4/5 of a lease time after the kill; it must be free within one lease time, plus
		// a poll and slack for a busy machine.
		if took < inflight.DefaultLease*3/5 || took > inflight.DefaultLease+5*time.Second {
			t.Fatalf("%s got the slot %v after the kill; lease %v", got, took, inflight.DefaultLease)
		}
		t.Logf("the second replica got the slot %v after the kill (lease %v)", took.Round(time.Millisecond), inflight.DefaultLease)
	case <-time.After(inflight.DefaultLease + 20*time.Second):
		t.Fatal("the slot of the killed replica was never freed")
	}
	if status := <-secondAnswer; status != 200 {
		t.Fatalf("second checkout: %d", status)
	}
}
