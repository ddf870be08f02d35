package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// lineConfig: a drop of two sneakers for a queue of one place that sells out with them, and a queue
// nobody is let into yet.
func lineConfig(originURL, redisAddr string) string {
	return fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
redis: {addr: %q}
log: {level: warn}
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
queues:
  - {id: drop, capacity: 1, sold_out_with: [sneaker]}
  - {id: line, capacity: 0}
products:
  - {id: sneaker, stock: 2, per_user_limit: 1, name: "Sneaker"}
routes:
  - name: checkout
    match: "POST /checkout/{product}"
    admission: {type: stock, product: "path:product", user: "header:X-User"}
`, originURL, redisAddr)
}

// lastSeenLongAgo makes the waiters at positions look gone: last heard from ten minutes ago.
func lastSeenLongAgo(t *testing.T, rdb *redis.Client, queue string, positions ...int64) {
	t.Helper()
	ctx := context.Background()
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	s := now.Add(-10 * time.Minute).Unix()
	for _, pos := range positions {
		if err := rdb.SetRange(ctx, "edgeq:{q:"+queue+"}:hb", 4*pos, string([]byte{byte(s >> 24), byte(s >> 16), byte(s >> 8), byte(s)})).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// The line at the end of a drop: at the sell-out, those still waiting and there are turned away and
// those long silent gave up; a queue deleted with visitors in line turns them away as closed. Everyone's
// waits run to that moment, the served visitors' waits stay their own.
func TestReport_TheLineAtTheEnd(t *testing.T) {
	redisSrv := privateRedis(t)
	in := start(t, lineConfig(newOrigin(t).URL, redisSrv.Addr()))
	rdb := redis.NewClient(&redis.Options{Addr: redisSrv.Addr()})
	defer rdb.Close()

	_, holder := joinQueue(t, in, "drop")
	if resp, err := http.PostForm(in.public+"/_edgeq/generate_token", url.Values{"queue_id": {"drop"}, "request_id": {holder}}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the first visitor's token: %v %v", resp, err)
	}
	for range 6 {
		joinQueue(t, in, "drop") // positions 2..7
	}
	for range 3 {
		joinQueue(t, in, "line") // positions 1..3
	}
	lastSeenLongAgo(t, rdb, "drop", 2, 3)
	lastSeenLongAgo(t, rdb, "line", 1)
	time.Sleep(3 * time.Second) // the waits to the end are at least this
	for i := range 2 {
		req, _ := http.NewRequest("POST", in.public+"/checkout/sneaker", nil)
		req.Header.Set("X-User", fmt.Sprintf("buyer-%d", i))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("purchase %d: %d", i, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest("DELETE", in.admin+"/api/queue/line", nil)
	req.Header.Set("Authorization", "Bearer test-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("deleting the queue: %v %v", resp, err)
	}
	resp.Body.Close()

	span := "&from=" + url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)) +
		"&to=" + url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	eventually(t, "the sell-out's line in the report: 4 turned away, 2 gave up", func() bool {
		rep, _ := readReport(t, in, "queue=drop"+span)
		s := rep.Summary
		return s.TurnedAway.SoldOut == 4 && s.GaveUp == 2
	})
	rep, raw := readReport(t, in, "queue=drop"+span)
	s := rep.Summary
	if s.TurnedAway.Closed != 0 || s.Served != 1 || s.Joined != 7 {
		t.Fatalf("drop: %s", raw)
	}
	// Seven waits in all: the served visitor's (none to speak of), two that ended at once (last seen
	// before they joined: none), four that ran 3 s and more to the sell-out. The median is one of those.
	if !s.WaitSeconds.Everyone.P50.Valid() || s.WaitSeconds.Everyone.P50 < 2.5 || s.WaitSeconds.Served.Max > 1.5 {
		t.Fatalf("waits: everyone %+v, served %+v; want everyone's median at least 2.5 s (3 s, in the report's buckets), the served one's at most 1.5 s", s.WaitSeconds.Everyone, s.WaitSeconds.Served)
	}
	eventually(t, "the deleted queue's line in the report: 2 turned away, 1 gave up", func() bool {
		rep, _ := readReport(t, in, "queue=line"+span)
		return rep.Summary.TurnedAway.Closed == 2 && rep.Summary.GaveUp == 1
	})
}
