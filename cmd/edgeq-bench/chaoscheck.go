package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeq/edgeq/internal/vocab"
)

// chaosShop is the chaos run's shop: it records every purchase that reaches it (by Edgeq-Admission-Id)
// and the orders it places. A purchase takes 20-120 ms; one in twenty is refused with a 503 (no
// order); while slow, each takes longer than origin.timeout and the order is placed all the same (the
// worst case for an edge that stops waiting).
type chaosShop struct {
	addr string
	srv  *http.Server
	slow atomic.Bool

	mu       sync.Mutex
	arrivals map[string]time.Time // admission id -> when it first reached the shop
	orders   map[string]time.Time // admission id -> when its order was placed
	timeout  time.Duration
}

func startChaosShop(originTimeout time.Duration) (*chaosShop, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &chaosShop{addr: ln.Addr().String(), arrivals: map[string]time.Time{}, orders: map[string]time.Time{}, timeout: originTimeout}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve)}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *chaosShop) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	id := r.Header.Get("Edgeq-Admission-Id")
	if id == "" {
		_, _ = w.Write([]byte("ok"))
		return
	}
	s.mu.Lock()
	if _, seen := s.arrivals[id]; !seen {
		s.arrivals[id] = time.Now()
	}
	s.mu.Unlock()
	if s.slow.Load() {
		time.Sleep(s.timeout + 500*time.Millisecond)
	} else {
		time.Sleep(time.Duration(20+rand.IntN(100)) * time.Millisecond)
		if rand.IntN(20) == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
	}
	s.mu.Lock()
	if _, placed := s.orders[id]; !placed {
		s.orders[id] = time.Now()
	}
	s.mu.Unlock()
	_, _ = w.Write([]byte("order placed"))
}

func (s *chaosShop) close() { _ = s.srv.Close() }

func decodeJSON(resp *http.Response, v any) {
	defer func() { _ = resp.Body.Close() }()
	_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(v)
}

// chaosRecord is an admission as the admin API lists it.
type chaosRecord struct {
	ID         string `json:"id"`
	State      string `json:"state"`
	ReleasedAt string `json:"released_at"`
	Reason     string `json:"reason"`
}

// chaosReport is what the run comes to: the invariants, each with its figures.
type chaosReport struct {
	stock, remaining, orders, arrivals, held, unsettled, released int64
	soldAfterOrphaned                                             int64 // orders whose units the orphan sweep gave back after the shop took them
	resentAfterRelease, releasedWithOrder, lost                   []string
	duplicatePositions                                            int64
	joins                                                         int64
}

// settleAndCheck waits until edgeq has settled what it can (origin.timeout, a lease with its margin
// and a sweep, the worker's records), then reads the store through the admin API of a replica and
// checks the invariants.
func (run *chaosRun) settleAndCheck() (*chaosReport, error) {
	admin := run.replicas[len(run.replicas)-1].admin
	time.Sleep(chaosOriginTimeout + 15*time.Second + 2*time.Second + 6*time.Second)
	// The worker writes records from the event streams: read until two reads agree.
	var rd *chaosRead
	for attempt := 0; attempt < 30; attempt++ {
		next, err := run.read(admin)
		if err != nil {
			return nil, err
		}
		if rd != nil && next.held == rd.held && next.released == rd.released && next.remaining == rd.remaining {
			break
		}
		rd = next
		time.Sleep(time.Second)
	}
	rep := rd.chaosReport
	rep.stock = run.stock
	run.shop.mu.Lock()
	defer run.shop.mu.Unlock()
	rep.orders, rep.arrivals = int64(len(run.shop.orders)), int64(len(run.shop.arrivals))
	for id, arrived := range run.shop.arrivals {
		rec, ok := rd.records[id]
		if !ok {
			rep.lost = append(rep.lost, id)
			continue
		}
		if rec.State != "released" {
			continue
		}
		releasedAt, err := time.Parse(vocab.MilliTime, rec.ReleasedAt)
		if err != nil {
			return nil, fmt.Errorf("record %s: released_at %q", id, rec.ReleasedAt)
		}
		if arrived.After(releasedAt.Add(time.Millisecond)) {
			rep.resentAfterRelease = append(rep.resentAfterRelease, id)
			continue
		}
		if _, placed := run.shop.orders[id]; placed {
			if rec.Reason == "orphaned" && !arrived.After(releasedAt) {
				rep.soldAfterOrphaned++
			} else {
				rep.releasedWithOrder = append(rep.releasedWithOrder, id)
			}
		}
	}
	rep.duplicatePositions, rep.joins = run.duplicates.Load(), run.joins.Load()
	return rep, nil
}

// violated reports whether any invariant does not hold.
func (r *chaosReport) violated() bool {
	return r.orders-r.soldAfterOrphaned > r.stock || r.stock-r.remaining != r.held ||
		len(r.resentAfterRelease) > 0 || len(r.releasedWithOrder) > 0 || len(r.lost) > 0 || r.duplicatePositions > 0
}

// print writes the invariants as a table, then the nemesis history.
func (r *chaosReport) print(w io.Writer, history []nemesisEvent) {
	held := func(ok bool) string {
		if ok {
			return "held"
		}
		return "**VIOLATED**"
	}
	_, _ = fmt.Fprintf(w, "\n| invariant | figures | |\n|---|---|---|\n")
	_, _ = fmt.Fprintf(w, "| orders at the shop <= stock (less orders whose units the orphan sweep gave back after the shop took them: orphans: release) | %d orders, %d of them given back after, stock %d | %s |\n",
		r.orders, r.soldAfterOrphaned, r.stock, held(r.orders-r.soldAfterOrphaned <= r.stock))
	_, _ = fmt.Fprintf(w, "| units taken == admissions holding units (committed or unsettled) | %d taken, %d held (%d unsettled) | %s |\n",
		r.stock-r.remaining, r.held, r.unsettled, held(r.stock-r.remaining == r.held))
	_, _ = fmt.Fprintf(w, "| no admission reached the shop after its units were given back | %d did %s | %s |\n",
		len(r.resentAfterRelease), clipIDs(r.resentAfterRelease), held(len(r.resentAfterRelease) == 0))
	_, _ = fmt.Fprintf(w, "| no order's units given back on the shop's answer | %d %s | %s |\n",
		len(r.releasedWithOrder), clipIDs(r.releasedWithOrder), held(len(r.releasedWithOrder) == 0))
	_, _ = fmt.Fprintf(w, "| no admitted request lost: every purchase at the shop has its record | %d of %d without %s | %s |\n",
		len(r.lost), r.arrivals, clipIDs(r.lost), held(len(r.lost) == 0))
	_, _ = fmt.Fprintf(w, "| no queue place handed to two visitors | %d positions twice in %d joins | %s |\n",
		r.duplicatePositions, r.joins, held(r.duplicatePositions == 0))
	_, _ = fmt.Fprintf(w, "\nnemesis (%d events):\n", len(history))
	for _, e := range history {
		_, _ = fmt.Fprintf(w, "  %8s  %s\n", e.at, e.action)
	}
}

func clipIDs(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	if len(ids) > 5 {
		return fmt.Sprintf("%v ...", ids[:5])
	}
	return fmt.Sprint(ids)
}

// chaosRead is one reading of the store.
type chaosRead struct {
	*chaosReport
	records map[string]chaosRecord
}

func (run *chaosRun) read(admin string) (*chaosRead, error) {
	get := func(path string, v any) error {
		req, _ := http.NewRequest("GET", "http://"+admin+path, nil)
		req.Header.Set("Authorization", "Bearer "+benchAdminKey)
		resp, err := run.client.Do(req)
		if err != nil {
			return err
		}
		if resp.StatusCode != 200 {
			_ = resp.Body.Close()
			return fmt.Errorf("%s: %d", path, resp.StatusCode)
		}
		decodeJSON(resp, v)
		return nil
	}
	var product struct {
		Stock          int64 `json:"stock"`
		RemainingStock int64 `json:"remaining_stock"`
	}
	if err := get("/api/products/p", &product); err != nil {
		return nil, err
	}
	rd := &chaosRead{chaosReport: &chaosReport{remaining: product.RemainingStock}, records: map[string]chaosRecord{}}
	for page := 1; ; page++ {
		var list struct {
			Items      []chaosRecord `json:"items"`
			TotalCount int           `json:"total_count"`
		}
		if err := get(fmt.Sprintf("/api/admissions?page=%d&page_size=100", page), &list); err != nil {
			return nil, err
		}
		for _, rec := range list.Items {
			rd.records[rec.ID] = rec
			switch rec.State {
			case "admitted":
				rd.held++
			case "released":
				rd.released++
			}
		}
		if len(list.Items) == 0 || page*100 >= list.TotalCount {
			break
		}
	}
	var unsettled struct {
		TotalCount int64 `json:"total_count"`
	}
	if err := get("/api/admissions?state=admitted&older_than=0&page_size=1", &unsettled); err != nil {
		return nil, err
	}
	rd.unsettled = unsettled.TotalCount
	return rd, nil
}
