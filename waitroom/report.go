package waitroom

// The waiting room's part of the report (report, docs/reference.md "The report"): what this
// replica sees is counted in its tally (joins, tokens issued with each visitor's waiting time, refused
// joins, Turnstile checks, sessions finished), what the scripts decide by themselves in the queue's
// meta (count_for_report in lib.lua); each tick writes both, with the queue's gauges, in one call per
// queue.

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/report"
)

// queueReport is the report's scope of a queue.
func (r *Room) queueReport(queueID string) *report.Scope { return r.tally.Scope(report.Queue, queueID) }

// tokenIssued counts a token issued to pos and the visitor's wait: now on the store's clock minus the
// time its position was handed out (joinClock), or the opening when it joined the pre-queue.
func (r *Room) tokenIssued(queueID, epoch string, pos int64) {
	r.tokensIssued.WithLabelValues(queueID).Inc()
	sc := r.queueReport(queueID)
	sc.Add(report.Served, 1)
	q := r.tracked(queueID)
	if q == nil {
		return
	}
	s := q.snap.Load()
	if s == nil || s.Epoch != epoch {
		return
	}
	now := s.storeNow().UnixMilli()
	if at, ok := q.waitFrom(s, pos, now); ok {
		sc.Wait(time.Duration(now-at) * time.Millisecond)
	}
}

// refusedJoin counts a join answered e.
func (r *Room) refusedJoin(queueID string, e *web.Error) {
	if e.Code == web.ErrQueueNotFound.Code || r.tracked(queueID) == nil {
		return // no such queue: nothing to count it in, and no scope made for a made-up id
	}
	r.queueReport(queueID).Refuse(e.Code)
}

// finished counts a session ended by finish: how it ended, and whether it revoked a live token.
func (r *Room) finished(queueID string, final State, revoked bool) {
	sc := r.queueReport(queueID)
	switch final {
	case StateCompleted:
		sc.Add(report.Completed, 1)
	case StateAbandoned, StateSkipped:
		sc.Add(report.Abandoned, 1)
	}
	if revoked {
		sc.Add(report.Revoked, 1)
	}
}

// flushReport writes every tracked queue's counts and gauges (report.Writer.Flush), each tick. A queue
// this replica counted nothing for is written only when its gauges changed, its scripts counted
// something (ReportMoves), or reportIdleEvery passed: an idle queue costs the store a call every 5 s
// per replica, not every tick.
func (r *Room) flushReport(ctx context.Context) {
	for _, q := range r.all() {
		r.queueReport(q.id) // every tracked queue is looked at: its gauges are sampled each tick
	}
	now := time.Now()
	r.report.Flush(ctx, r.tally, report.Queue, func(id string) report.Extra {
		q := r.tracked(id)
		x := report.Extra{Aux: r.keys.Queue(id, "meta"), Moves: "gave_up=r_gave;expired=r_exp", Peaks: report.Peaks}
		if q == nil {
			return x // counted before the queue went away: written without gauges
		}
		s := q.snap.Load()
		if s != nil {
			waiting := s.Waiting()
			if s.SoldOut {
				// Turned away (leavers.go): their places are kept for a restock, but nobody waits for a
				// turn any more.
				waiting = 0
			}
			x.Gauges = report.Waiting + "=" + strconv.FormatInt(waiting, 10) + ";" +
				report.Active + "=" + strconv.FormatInt(s.Tokens(), 10) + ";" +
				report.Assigned + "=" + strconv.FormatInt(s.Counter, 10) + ";" +
				report.Serving + "=" + strconv.FormatInt(s.Serving, 10)
		}
		x.Always = r.reportMarks.due(id, x.Gauges, s == nil || s.ReportMoves, now)
		return x
	})
}

// reportIdleEvery is how often a queue's gauges are written while they stand still and nothing was
// counted: within every minute of the report (each minute keeps the peaks of waiting and active, and
// the store's clock decides the minute).
const reportIdleEvery = 5 * time.Second

// reportMarks remembers, per queue, the gauges this replica last wrote to the report and when.
type reportMarks struct {
	mu    sync.Mutex
	marks map[string]reportMark
}

type reportMark struct {
	gauges string
	at     time.Time
}

// due tells whether a queue's gauges (and the counters its scripts keep) are to be written now even
// though this replica counted nothing for it, and notes the write.
func (m *reportMarks) due(id, gauges string, moves bool, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	last, ok := m.marks[id]
	if ok && !moves && last.gauges == gauges && now.Sub(last.at) < reportIdleEvery {
		return false
	}
	if m.marks == nil {
		m.marks = map[string]reportMark{}
	}
	m.marks[id] = reportMark{gauges: gauges, at: now}
	return true
}

// forget drops a queue's mark (the queue is no longer tracked).
func (m *reportMarks) forget(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.marks, id)
}

// ReportLottery is a queue's lottery for the report, and whether the queue exists.
func (r *Room) ReportLottery(ctx context.Context, queueID string) (report.Lottery, bool) {
	s := r.snapshotOf(ctx, queueID)
	if s == nil {
		return report.Lottery{}, false
	}
	return report.NewLottery(s.Lottery.n, s.Lottery.seed), true
}

// joinClock remembers when a queue's positions were handed out, from the counter each tick reads on the
// store's clock, so that a served visitor's wait is known without storing anything per visitor: its
// position was handed out between the last tick that saw the counter below it and the first that saw
// it at or above it (interpolated between the two, so within one tick). It keeps the samples where the
// counter grew, at most maxJoinSamples: past that the older half is thinned to every other sample, so
// a long drop keeps coarser times for its early positions. A replica that starts during a drop reads
// the store's per-minute samples of the counter (the report's assigned gauge) for the positions handed
// out before it started.
type joinClock struct {
	mu      sync.Mutex
	epoch   string
	samples []joinSample // counter ascending, time ascending
	last    joinSample   // the latest tick, when the counter did not grow
}

type joinSample struct {
	at      int64 // store ms
	counter int64
}

const maxJoinSamples = 100_000

// observe records the counter a tick read at store time at.
func (c *joinClock) observe(epoch string, at, counter int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch != c.epoch {
		c.epoch, c.samples, c.last = epoch, nil, joinSample{}
	}
	n := len(c.samples)
	if n > 0 && counter <= c.samples[n-1].counter {
		if at > c.last.at {
			c.last = joinSample{at: at, counter: c.samples[n-1].counter}
		}
		return
	}
	if n > 0 && c.last.at > c.samples[n-1].at {
		// The counter stood still until the tick before: positions above it came after that tick.
		c.samples = append(c.samples, c.last)
	}
	c.samples = append(c.samples, joinSample{at: at, counter: counter})
	c.last = joinSample{}
	if len(c.samples) > maxJoinSamples {
		half := len(c.samples) / 2
		kept := c.samples[:0]
		for i := 0; i < half; i += 2 {
			kept = append(kept, c.samples[i])
		}
		c.samples = append(kept, c.samples[half:]...)
	}
}

// seed adds samples older than every sample held (read from the store's minutes).
func (c *joinClock) seed(epoch string, older []joinSample) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch != c.epoch && c.epoch != "" {
		return
	}
	c.epoch = epoch
	var keep []joinSample
	for _, s := range older {
		if (len(keep) == 0 || s.counter > keep[len(keep)-1].counter) &&
			(len(c.samples) == 0 || (s.counter < c.samples[0].counter && s.at < c.samples[0].at)) {
			keep = append(keep, s)
		}
	}
	c.samples = append(keep, c.samples...)
}

// joinedAt is when pos was handed out (store ms), estimated; now is the store's clock, the answer for
// a position above every sample (handed out since the last tick). ok is false before any sample.
func (c *joinClock) joinedAt(epoch string, pos, now int64) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch != c.epoch || len(c.samples) == 0 {
		return 0, false
	}
	i, _ := slices.BinarySearchFunc(c.samples, pos, func(s joinSample, pos int64) int {
		switch {
		case s.counter < pos:
			return -1
		case s.counter > pos:
			return 1
		}
		return 0
	})
	if i == len(c.samples) {
		return now, true
	}
	hi := c.samples[i]
	if i == 0 || hi.counter == pos {
		return hi.at, true
	}
	lo := c.samples[i-1]
	// Arrivals between two samples are taken as evenly spread.
	return lo.at + (hi.at-lo.at)*(pos-lo.counter)/(hi.counter-lo.counter), true
}

// seedJoins gives a queue's join clock the store's per-minute samples of the counter, up to a day
// back, when this replica starts tracking a queue that has places already (counter > 0): the waits of
// those who joined before it started are then known to the minute.
func (r *Room) seedJoins(q *queue, epoch string, counter int64) {
	if counter == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rd := report.Reader{Client: r.client, Keys: r.keys}
	minutes, values, err := rd.Samples(ctx, report.Queue, q.id, report.Assigned, time.Now().Add(-24*time.Hour))
	if err != nil {
		r.logger.Debug("reading the queue's counter samples failed", "queue", q.id, "error", err.Error())
		return
	}
	older := make([]joinSample, len(minutes))
	for i, m := range minutes {
		// The minute's last sample: taken by its end.
		older[i] = joinSample{at: m.Add(time.Minute).UnixMilli(), counter: values[i]}
	}
	q.joins.seed(epoch, older)
}

// ReadLottery reads a queue's lottery from the store without ticking it (`edgeq report`), and whether
// the queue exists.
func ReadLottery(ctx context.Context, st *store.Store, queueID string) (report.Lottery, bool, error) {
	m, err := st.Client.HMGet(ctx, st.Keys.Queue(queueID, "meta"), "epoch", "pre_n", "seed").Result()
	if err != nil {
		return report.Lottery{}, false, err
	}
	if m[0] == nil {
		return report.Lottery{}, false, nil
	}
	n, _ := m[1].(string)
	seed, _ := m[2].(string)
	size, _ := strconv.ParseInt(n, 10, 64)
	return report.NewLottery(size, seed), true, nil
}
