package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// placesConfig is a drop behind a trusted proxy (127.0.0.1: its X-Forwarded-For names the client)
// with the queue given, its pages behind it. The per-IP join rate is off unless limits say otherwise,
// so what refuses a join is places_per_ip.
func placesConfig(originURL, redisAddr, queue string) string {
	return fmt.Sprintf(`
server: {listen: "127.0.0.1:0", trusted_proxies: ["127.0.0.1"]}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
redis: {addr: %q}
log: {level: warn}
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
queues:
  - %s
routes:
  - {name: drop, match: "GET /drop/", queue: drop}
`, originURL, redisAddr, queue)
}

// lotteryQueue is a drop opening at opensAt with a two-hour pre-queue drawn by lot, no room inside
// (the admin API's increment_serving_position serves), staff addresses that bypass it, and extra
// settings.
func lotteryQueue(opensAt time.Time, extra string) string {
	return fmt.Sprintf(`{id: drop, capacity: 0, opens_at: %q, prequeue: 2h, shuffle: true, bypass_cidrs: ["203.0.113.0/24"], %s}`,
		opensAt.UTC().Format(time.RFC3339), extra)
}

// joinFrom asks for a place as a cookie-less client; addr "" is the proxy's peer itself (127.0.0.1),
// else the client the trusted proxy names in X-Forwarded-For. It returns the status, the error code
// (when not 200) and the request id (when 200).
func joinFrom(t *testing.T, base, addr string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/_edgeq/assign_queue_pos", strings.NewReader(url.Values{"queue_id": {"drop"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if addr != "" {
		req.Header.Set("X-Forwarded-For", addr)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, "", ""
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var body struct {
		RequestID string `json:"request_id"`
		Error     string `json:"error"`
	}
	json.Unmarshal(raw, &body)
	return resp.StatusCode, body.Error, body.RequestID
}

// queueCounts is what the admin API says of the queue drop.
type queueCounts struct {
	AssignedPos int64 `json:"assigned_pos"`
	WaitingNum  int64 `json:"waiting_num"`
	ServingPos  int64 `json:"serving_pos"`
	PlacesPerIP int64 `json:"places_per_ip"`
	Lottery     *struct {
		Size int64 `json:"size"`
	} `json:"lottery"`
}

func countsOf(t *testing.T, in *instance) queueCounts {
	t.Helper()
	var q queueCounts
	if code := adminJSON(t, in, "GET", "/api/queue/drop", "", &q); code != 200 {
		t.Fatalf("GET /api/queue/drop: %d", code)
	}
	return q
}

// reloadTo rewrites the configuration file and waits for the reload number n to be applied.
func reloadTo(t *testing.T, in *instance, text string, n float64) {
	t.Helper()
	in.rewrite(t, text)
	eventually(t, "the reload", func() bool { return in.metric(t, `edgeq_config_reload_total{result="ok"}`) == n })
}

// 25 cookie-less joins from one address during a lottery's pre-queue took 25 places,
// all of them in the draw. With places_per_ip 2 the address gets 2 places and 23 answers 429
// TOO_MANY_PLACES that take nothing, while 25 addresses behind a trusted proxy take a place each (an
// IPv6 /64 counts as one address); the store holds no client address, only keyed hashes of them; and a
// reload that lowers the setting takes no place away, it only refuses the next join.
func TestPlacesPerIP_OneAddressHoldsItsLimitOfTheLotteryManyAddressesTakeTheirs(t *testing.T) {
	redisSrv := privateRedis(t)
	origin := newOrigin(t)
	opensAt := time.Now().Add(time.Hour)
	in := start(t, placesConfig(origin.URL, redisSrv.Addr(), lotteryQueue(opensAt, "places_per_ip: 2")))

	var mine []string
	refused := 0
	for i := range 25 {
		switch code, errCode, id := joinFrom(t, in.public, ""); {
		case code == 200:
			mine = append(mine, id)
		case code == http.StatusTooManyRequests && errCode == "TOO_MANY_PLACES":
			refused++
		default:
			t.Fatalf("join %d from one address: %d %s", i, code, errCode)
		}
		if q := countsOf(t, in); q.AssignedPos != int64(len(mine)) || q.WaitingNum != int64(len(mine)) {
			t.Fatalf("after join %d (%d places, %d refused): assigned %d, waiting %d", i, len(mine), refused, q.AssignedPos, q.WaitingNum)
		}
	}
	if len(mine) != 2 || refused != 23 {
		t.Fatalf("25 joins from one address: %d places, %d refused TOO_MANY_PLACES; want 2 and 23", len(mine), refused)
	}
	if n := in.metric(t, `edgeq_rate_limited_total{limit="places"}`); n != 23 {
		t.Errorf(`edgeq_rate_limited_total{limit="places"} = %v, want 23`, n)
	}

	// 25 addresses behind the trusted proxy: a place each.
	for i := range 25 {
		if code, errCode, _ := joinFrom(t, in.public, fmt.Sprintf("198.51.100.%d", i+1)); code != 200 {
			t.Fatalf("join from address %d: %d %s", i, code, errCode)
		}
	}
	// IPv6: a /64 is one address; another /64 is another.
	for i, c := range []struct {
		addr string
		want int
	}{
		{"2001:db8:1:2::a", 200}, {"2001:db8:1:2:ffff::b", 200}, {"2001:db8:1:2::c", 429}, {"2001:db8:1:3::a", 200},
	} {
		if code, errCode, _ := joinFrom(t, in.public, c.addr); code != c.want {
			t.Fatalf("IPv6 join %d from %s: %d %s, want %d", i, c.addr, code, errCode, c.want)
		}
	}
	const placed = 2 + 25 + 3
	if q := countsOf(t, in); q.AssignedPos != placed || q.WaitingNum != placed || q.PlacesPerIP != 2 {
		t.Fatalf("after the joins: %+v, want %d places", q, placed)
	}
	text := storeText(t, redisSrv.Addr())
	for _, addr := range []string{"127.0.0.1", "198.51.100.", "2001:db8"} {
		if strings.Contains(text, addr) {
			t.Fatalf("the store holds the client address %s", addr)
		}
	}

	// Lowering the setting by a reload takes no place away: the address keeps both, and is refused the
	// next.
	reloadTo(t, in, placesConfig(origin.URL, redisSrv.Addr(), lotteryQueue(opensAt, "places_per_ip: 1")), 1)
	if q := countsOf(t, in); q.PlacesPerIP != 1 || q.AssignedPos != placed || q.WaitingNum != placed {
		t.Fatalf("after lowering places_per_ip to 1: %+v", q)
	}
	for _, id := range mine {
		if st := statusOf(t, in, id); st["queue_status"] != "prequeue" {
			t.Fatalf("a place after lowering places_per_ip: %v", st)
		}
	}
	if code, errCode, _ := joinFrom(t, in.public, ""); code != http.StatusTooManyRequests || errCode != "TOO_MANY_PLACES" {
		t.Fatalf("a join after lowering places_per_ip: %d %s", code, errCode)
	}
	// At the opening both are in the draw.
	reloadTo(t, in, placesConfig(origin.URL, redisSrv.Addr(), lotteryQueue(time.Now().Add(-time.Second), "places_per_ip: 1")), 2)
	eventually(t, "the draw", func() bool { q := countsOf(t, in); return q.Lottery != nil && q.Lottery.Size == placed })
}

// A place stops counting once it is served; invitations and bypass_cidrs never count: an address at
// its limit still uses an invitation, staff addresses pass the gate and keep their own places, and
// once one of the address's places is reached it may join again, once.
func TestPlacesPerIP_ServedPlacesInvitationsAndBypassDoNotCount(t *testing.T) {
	redisSrv := privateRedis(t)
	origin := newOrigin(t)
	in := start(t, placesConfig(origin.URL, redisSrv.Addr(), lotteryQueue(time.Now().Add(time.Hour), "places_per_ip: 2")))
	var mine []string
	for i := range 3 {
		code, errCode, id := joinFrom(t, in.public, "")
		if want := map[bool]int{true: 200, false: 429}[i < 2]; code != want {
			t.Fatalf("join %d: %d %s, want %d", i, code, errCode, want)
		}
		if code == 200 {
			mine = append(mine, id)
		}
	}
	// Staff pass the gate at once, and that takes no place and counts for nothing.
	for range 3 {
		if r, err := send("GET", in.public+"/drop/page", http.Header{"X-Forwarded-For": {"203.0.113.9"}}); err != nil || r.status != 200 {
			t.Fatalf("staff through bypass_cidrs: %v %v", r.status, err)
		}
	}
	for i, want := range []int{200, 200, 429} {
		if code, errCode, _ := joinFrom(t, in.public, "203.0.113.9"); code != want {
			t.Fatalf("staff join %d after passing the gate: %d %s, want %d", i, code, errCode, want)
		}
	}

	// The opening draws the order of the four; nobody is let in (capacity 0).
	reloadTo(t, in, placesConfig(origin.URL, redisSrv.Addr(), lotteryQueue(time.Now().Add(-time.Second), "places_per_ip: 2")), 1)
	eventually(t, "the draw", func() bool { q := countsOf(t, in); return q.Lottery != nil && q.Lottery.Size == 4 })

	// An invitation joins the address at its limit, and does not count: behind the pre-queue, unserved.
	var created createdInvites
	if code := adminJSON(t, in, "POST", "/api/queue/drop/invites", `{"count": 1}`, &created); code != http.StatusCreated {
		t.Fatalf("creating an invitation: %d", code)
	}
	guest := newShopper(t, "drop")
	if code, loc, body := guest.useInvite(t, in.public, created.Items[0].URL); code != http.StatusSeeOther {
		t.Fatalf("invitation from the address at its limit: %d %s %s", code, loc, body)
	}
	if q := countsOf(t, in); q.AssignedPos != 5 {
		t.Fatalf("the invitation took no place: %+v", q)
	}
	if code, errCode, _ := joinFrom(t, in.public, ""); code != http.StatusTooManyRequests || errCode != "TOO_MANY_PLACES" {
		t.Fatalf("a join of the address at its limit: %d %s", code, errCode)
	}

	// Serve one rank at a time until one of the address's places is reached: the other is still
	// waiting, and so is the invitation's (it is behind the pre-queue).
	served := func() (n int) {
		for _, id := range mine {
			if statusOf(t, in, id)["queue_status"] == "served" {
				n++
			}
		}
		return n
	}
	for step := 0; served() == 0; step++ {
		if step == 4 {
			t.Fatal("the pre-queue was served without reaching the address's places")
		}
		adminForm(t, in, "/api/queue/increment_serving_position", url.Values{"queue_id": {"drop"}, "increment_by": {"1"}})
	}
	if served() != 1 {
		t.Fatalf("%d of the address's places served, want 1", served())
	}
	for i, want := range []int{200, 429} {
		if code, errCode, _ := joinFrom(t, in.public, ""); code != want {
			t.Fatalf("join %d once one of the address's places was served: %d %s, want %d", i, code, errCode, want)
		}
	}
}

// The count is the store's, atomic with the join: two edgeq instances on one redis-server, hundreds of
// joins from four addresses at once spread over both, and each address gets exactly places_per_ip
// places (method random: every place is in the draws).
func TestPlacesPerIP_TwoReplicasNeverExceedTheLimitTogether(t *testing.T) {
	redisSrv := privateRedis(t)
	origin := newOrigin(t)
	text := placesConfig(origin.URL, redisSrv.Addr(), `{id: drop, capacity: 0, method: random, places_per_ip: 5}`)
	replicas := []*instance{start(t, text), start(t, text)}
	const addresses, each, limit = 4, 100, 5
	var mu sync.Mutex
	placed, refused := map[string]int{}, 0
	var wg sync.WaitGroup
	for i := range addresses * each {
		addr := fmt.Sprintf("198.51.100.%d", i%addresses+1)
		wg.Go(func() {
			code, errCode, _ := joinFrom(t, replicas[i%2].public, addr)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case code == 200:
				placed[addr]++
			case code == http.StatusTooManyRequests && errCode == "TOO_MANY_PLACES":
				refused++
			default:
				t.Errorf("join from %s: %d %s", addr, code, errCode)
			}
		})
	}
	wg.Wait()
	for a := range addresses {
		addr := fmt.Sprintf("198.51.100.%d", a+1)
		if placed[addr] != limit {
			t.Errorf("%s took %d places, limit %d", addr, placed[addr], limit)
		}
	}
	if refused != addresses*(each-limit) {
		t.Errorf("%d refused, want %d", refused, addresses*(each-limit))
	}
	if q := countsOf(t, replicas[0]); q.AssignedPos != addresses*limit || q.WaitingNum != addresses*limit {
		t.Errorf("the queue after the joins: %+v, want %d places", q, addresses*limit)
	}
}

// edgeq check warns when a lottery (shuffle) or a random queue lets one address hold any number of
// places, and only then.
func TestCheck_WarnsWhenALotteryHasNoPlacesPerIP(t *testing.T) {
	const warning = "places_per_ip is 0"
	opens := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, c := range []struct {
		name, queue string
		warns       bool
	}{
		{"shuffle", `{id: drop, opens_at: "` + opens + `", prequeue: 1h, shuffle: true}`, true},
		{"random", `{id: drop, method: random}`, true},
		{"shuffle with a limit", `{id: drop, opens_at: "` + opens + `", prequeue: 1h, shuffle: true, places_per_ip: 2}`, false},
		{"random with a limit", `{id: drop, method: random, places_per_ip: 2}`, false},
		{"fifo", `{id: drop}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "edgeq.yaml")
			os.WriteFile(path, []byte(placesConfig("http://127.0.0.1:1", "127.0.0.1:1", c.queue)), 0o600)
			problems, warnings, err := Check(path)
			if err != nil || len(problems) > 0 {
				t.Fatalf("Check: %v %v", err, problems)
			}
			if got := strings.Contains(strings.Join(warnings, "\n"), warning); got != c.warns {
				t.Fatalf("warned %v, want %v: %q", got, c.warns, warnings)
			}
		})
	}
}
