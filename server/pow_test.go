package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/pow"
)

// powChallenge fetches a join challenge of queue from edge.
func powChallenge(t *testing.T, edge, queue string) (challenge string, difficulty int) {
	t.Helper()
	resp, err := http.Get(edge + "/_edgeq/pow_challenge?queue_id=" + url.QueryEscape(queue))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct {
		Challenge  string `json:"challenge"`
		Difficulty int    `json:"difficulty"`
		ExpiresIn  int    `json:"expires_in"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != 200 || c.ExpiresIn != 120 {
		t.Fatalf("pow_challenge: %d %v %+v", resp.StatusCode, err, c)
	}
	return c.Challenge, c.Difficulty
}

// A burst of joins raises the difficulty of the next challenges on every replica (the join rate is
// the store's counter, which each replica's ticks read), up to max_difficulty; once the burst is
// over it falls back to the floor. Each join of the burst pays the difficulty it was given.
func TestPow_AdaptiveDifficultyRisesUnderABurstOnEveryReplica(t *testing.T) {
	redisSrv := privateRedisWith(t)
	origin := newOrigin(t)
	text := configText(origin.URL, routeA) + fmt.Sprintf(`
redis: {addr: %q}
identity: {secret: "a shared secret of the two replicas, 32 bytes or more"}
limits: {join_per_ip_per_minute: 0}
challenge: {provider: pow, pow: {difficulty: 2, adaptive: {max_difficulty: 9, joins_per_second: 20}}}
queues: [{id: drop, capacity: 0, turnstile: true}]
`, redisSrv.Addr())
	a, b := start(t, text), start(t, text)
	if _, d := powChallenge(t, b.public, "drop"); d != 2 {
		t.Fatalf("difficulty before the burst: %d, want the floor 2", d)
	}

	// About 300 joins a second through replica a for two seconds.
	var wg sync.WaitGroup
	var mu sync.Mutex
	highest := 0
	stop := time.Now().Add(2 * time.Second)
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				c, d := powChallenge(t, a.public, "drop")
				nonce, ok := pow.Solve(context.Background(), c, d)
				if !ok {
					t.Error("no nonce")
					return
				}
				r := postForm(t, a.public+"/_edgeq/assign_queue_pos", url.Values{
					"queue_id": {"drop"}, "pow_challenge": {c}, "pow_nonce": {strconv.FormatUint(nonce, 10)}}, http.Header{"Accept": {"application/json"}})
				if r.status != 200 {
					t.Errorf("join at difficulty %d: %d %s", d, r.status, r.body)
					return
				}
				mu.Lock()
				highest = max(highest, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	joined := b.metric(t, `edgeq_queue_assigned_position{queue="drop"}`)
	_, onB := powChallenge(t, b.public, "drop")
	t.Logf("%v joins; the burst's highest difficulty %d; replica b's after it %d", joined, highest, onB)
	if highest <= 2 || onB <= 2 || highest > 9 || onB > 9 {
		t.Fatalf("difficulty under the burst: %d on a, %d on b; want above the floor 2, at most 9", highest, onB)
	}
	eventually(t, "the difficulty falls back to the floor", func() bool {
		_, d := powChallenge(t, b.public, "drop")
		return d == 2
	})
}
