package admission

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/ledger"
)

// The ledger worker (docs/reference.md "Ledger") writes every event of every stream to PostgreSQL,
// behind the fast path: it is a consumer group of its own on the same streams as the admin-index
// worker, so a ledger that is slow or down holds back nothing but itself. Each pass reads what is new
// on every stream, writes it in one transaction (ledger.Write: idempotent upserts keyed by id, so an
// entry delivered again after a take-over changes nothing) and only then acknowledges it. While
// PostgreSQL cannot be reached the batch is retried with backoff for as long as it takes — the entries
// stay in the streams (trim.go: up to redis.stream_max_entries per stream, past which the oldest are
// trimmed unread, loudly) — and edgeq_ledger_lag_seconds grows. A batch PostgreSQL refuses (a server
// error about the data) is written one entry at a time and the refused entries are dead-lettered with
// target "ledger".

const (
	ledgerGroup = "edgeq-ledger"
	// ledgerRead bounds the entries read from one stream per pass.
	ledgerRead = 500
	// ledgerBackoffMax caps the wait between tries while PostgreSQL is unreachable.
	ledgerBackoffMax = 5 * time.Second
)

type ledgerWorker struct {
	s        *Service
	consumer string
	groups   map[string]bool
	streams  [][]ownerStream // each owner's streams
	listedAt time.Time
	claimAt  time.Time
	outage   bool // a write failed and none succeeded since (logged once)
	// stopAfterWrite, for tests: when it returns true the worker stops after writing a batch and
	// before acknowledging it, as if its process died between the two.
	stopAfterWrite func() bool
}

func (s *Service) runLedger(ctx context.Context) {
	w := &ledgerWorker{s: s, consumer: consumerName(), groups: map[string]bool{}}
	w.run(ctx)
}

func (w *ledgerWorker) run(ctx context.Context) { runPasses(ctx, w.pass) }

// pass reads every stream once, writes what it read and acknowledges it, and says what it found.
func (w *ledgerWorker) pass(ctx context.Context) (f found, stop bool) {
	s := w.s
	if time.Since(w.listedAt) > 5*time.Second {
		// The streams are trimmed only below what this group acknowledged while it is marked read.
		s.markGroupRead(ctx, ledgerGroup)
		if streams, err := s.ownerStreams(ctx, s.ledgeredKinds()); err == nil {
			w.streams, w.listedAt = streams, time.Now()
			for k, ok := range w.groups {
				if !ok {
					delete(w.groups, k)
				}
			}
		}
	}
	claim := time.Since(w.claimAt) > s.o.ClaimIdle/3
	if claim {
		w.claimAt = time.Now()
	}
	var batch ledger.Batch
	var entries []held
	var msgs []entryOf
	oldest := time.Time{}
	reads := s.readAll(ctx, w.streams, ledgerGroup, w.consumer, w.groups, claim, ledgerRead)
	f = foundIn(reads, ledgerRead)
	for _, r := range reads {
		src := r.src
		if len(r.msgs) == 0 {
			continue
		}
		h := held{src: src}
		for _, msg := range r.msgs {
			h.ids = append(h.ids, msg.ID)
			if err := ledgerRow(src, msg, &batch); err != nil {
				s.metrics.ledgerWrites.WithLabelValues("malformed").Inc()
				s.logger.Warn("ledger: skipping a malformed event", "stream", src.String(), "entry", msg.ID, "error", err.Error())
				continue
			}
			msgs = append(msgs, entryOf{src, msg})
			if t := streamTime(msg.ID); oldest.IsZero() || t.Before(oldest) {
				oldest = t
			}
		}
		entries = append(entries, h)
	}
	if len(entries) == 0 {
		s.metrics.ledgerLag.Set(0)
		return f, false
	}
	if !w.write(ctx, batch, msgs, oldest) {
		return f, true
	}
	if w.stopAfterWrite != nil && w.stopAfterWrite() {
		return f, true
	}
	s.ackAll(ctx, ledgerGroup, entries)
	s.metrics.ledgerLag.Set(0)
	return f, false
}

type entryOf struct {
	src ownerStream
	msg redis.XMessage
}

// write writes a batch, waiting out an unreachable PostgreSQL; false means ctx ended first (the
// entries stay pending for a take-over).
func (w *ledgerWorker) write(ctx context.Context, batch ledger.Batch, msgs []entryOf, oldest time.Time) bool {
	s := w.s
	wait := 100 * time.Millisecond
	if !oldest.IsZero() {
		s.metrics.ledgerLag.Set(time.Since(oldest).Seconds())
	}
	for {
		err := s.o.Ledger.Write(ctx, batch)
		if err == nil {
			s.metrics.ledgerWrites.WithLabelValues("written").Add(float64(batch.Len()))
			if w.outage {
				w.outage = false
				s.logger.Info("ledger: writing again", "events", batch.Len(), "lag_seconds", time.Since(oldest).Seconds())
			}
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if ledger.Refused(err) {
			w.writeEach(ctx, msgs, err)
			return true
		}
		s.metrics.ledgerWrites.WithLabelValues("retried").Add(float64(batch.Len()))
		if !w.outage {
			w.outage = true
			s.logger.Error("ledger: PostgreSQL cannot be written; sales go on, the events wait in the streams and are written when it is back",
				"events", batch.Len(), "error", err.Error())
		}
		if !oldest.IsZero() {
			s.metrics.ledgerLag.Set(time.Since(oldest).Seconds())
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, ledgerBackoffMax)
	}
}

// writeEach writes a refused batch one row at a time: an entry with a row PostgreSQL refuses again
// after the retries is dead-lettered (whole: reserve.lua's entry names several admissions, and the
// retry writes them all again, which changes nothing for those already written).
func (w *ledgerWorker) writeEach(ctx context.Context, msgs []entryOf, cause error) {
	s := w.s
	s.logger.Warn("ledger: PostgreSQL refused a batch; writing its events one by one", "events", len(msgs), "error", cause.Error())
	for _, m := range msgs {
		var rows ledger.Batch
		if ledgerRow(m.src, m.msg, &rows) != nil {
			continue
		}
		var refused error
		for _, one := range rows.Split() {
			err := s.retry(ctx, func() error { return s.o.Ledger.Write(ctx, one) })
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				refused = err
				continue
			}
			s.metrics.ledgerWrites.WithLabelValues("written").Inc()
		}
		if refused == nil {
			continue
		}
		if derr := s.deadLetterTo(ctx, targetLedger, m.src, m.msg, refused); derr != nil {
			s.logger.Error("ledger: dead-lettering an event failed", "stream", m.src.String(), "entry", m.msg.ID, "error", derr.Error())
			continue
		}
		s.metrics.ledgerWrites.WithLabelValues("dead_lettered").Inc()
		s.logger.Warn("ledger: event dead-lettered after retries", "stream", m.src.String(), "entry", m.msg.ID, "error", refused.Error())
	}
}

// streamTime is the time in a stream entry's id (milliseconds before the dash).
func streamTime(id string) time.Time {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

// ledgeredKinds are the kinds whose events go to the ledger: only their streams have its group.
func (s *Service) ledgeredKinds() []Kind {
	var kinds []Kind
	for _, k := range s.kinds {
		if _, ok := ledgered(k); ok {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// ledgerRow reads one entry of a ledgered kind's stream into the row it writes.
func ledgerRow(src ownerStream, msg redis.XMessage, b *ledger.Batch) error {
	l, ok := ledgered(src.kind)
	if !ok {
		return fmt.Errorf("%s admissions are not kept in the ledger", src.kind.Name())
	}
	return l.LedgerRow(src.owner, msg, b)
}

// LedgerBacklog is, for tests and `edgeq reconcile`, every stream's entries the ledger group has not
// acknowledged yet (read and pending, or not read yet), summed over the streams.
func (s *Service) LedgerBacklog(ctx context.Context) (int64, error) {
	streams, err := s.ownerStreams(ctx, s.ledgeredKinds())
	if err != nil {
		return 0, err
	}
	var total int64
	for _, src := range slices.Concat(streams...) {
		groups, err := s.client.XInfoGroups(ctx, src.stream()).Result()
		if err != nil {
			if strings.Contains(err.Error(), "no such key") {
				continue
			}
			return 0, err
		}
		found := false
		for _, g := range groups {
			if g.Name != ledgerGroup {
				continue
			}
			found = true
			if g.Lag < 0 {
				return 0, fmt.Errorf("%s: the ledger's lag is unknown (entries were trimmed or deleted)", src)
			}
			total += g.Pending + g.Lag
		}
		if !found {
			n, err := s.client.XLen(ctx, src.stream()).Result()
			if err != nil {
				return 0, err
			}
			total += n
		}
	}
	return total, nil
}
