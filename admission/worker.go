package admission

// The event worker: every replica's consumer of every owner's streams, of every kind, all in one
// consumer group. Each pass reads what is new on every stream in one pipeline (consume.go), now and
// then takes over the entries another consumer left pending, applies what it read (apply.go) and
// acknowledges it; an entry that fails every retry is dead-lettered (deadletters.go).

import (
	"context"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Run is the event worker: a consumer of every owner's streams in one consumer group (every replica
// runs one). Entries are acknowledged once applied or dead-lettered; entries left pending by a consumer
// that stopped are taken over after ClaimIdle. It returns when ctx ends.
func (s *Service) Run(ctx context.Context) {
	w := newWorker(s, consumerName())
	var wg sync.WaitGroup
	wg.Go(func() { s.runCompensations(ctx, time.Second) })
	wg.Go(func() { s.runCommitter(ctx) })
	for _, k := range s.kinds {
		if r, ok := k.(RunnerKind); ok {
			wg.Go(func() { r.Run(ctx) })
		}
	}
	wg.Go(func() { s.runLease(ctx) })
	wg.Go(func() { s.runSpellingsIndex(ctx) })
	wg.Go(func() { s.runReport(ctx, 250*time.Millisecond) })
	if s.o.Ledger != nil {
		wg.Go(func() { s.runLedger(ctx) })
	}
	w.run(ctx)
	wg.Wait()
}

// groupName is the event worker's consumer group on every owner's streams.
const groupName = "edgeq-workers"

func newWorker(s *Service, consumer string) *worker {
	return &worker{s: s, consumer: consumer, groups: map[string]bool{}, trim: trimmer{retired: map[string]bool{}}}
}

type worker struct {
	s        *Service
	consumer string
	groups   map[string]bool // streams whose group this worker made sure of
	streams  [][]ownerStream // each owner's streams
	listedAt time.Time
	claimAt  time.Time
	trim     trimmer
	// stopAfterRead, for tests: when it returns true the worker stops after reading entries and before
	// handling them, as if its process died.
	stopAfterRead func(src ownerStream, n int) bool
}

func (w *worker) run(ctx context.Context) { runPasses(ctx, w.pass) }

// pass reads what is new on every stream once, and now and then takes over stale pending entries.
func (w *worker) pass(ctx context.Context) (f found, stop bool) {
	s := w.s
	if time.Since(w.listedAt) > 5*time.Second {
		if streams, err := s.ownerStreams(ctx, s.kinds); err == nil {
			w.streams, w.listedAt = streams, time.Now()
			maps.DeleteFunc(w.groups, func(_ string, ok bool) bool { return !ok }) // another try for those that failed
		}
		if n, err := s.client.HLen(ctx, deadKey(s.keys)).Result(); err == nil {
			s.metrics.deadLetters.Set(float64(n))
		}
		for _, k := range s.kinds {
			if sw, ok := k.(SweepingKind); ok {
				sw.Sweep(ctx)
			}
		}
	}
	if time.Since(w.trim.at) > s.o.TrimEvery {
		w.trim.at = time.Now()
		s.markGroupRead(ctx, groupName)
		s.trimStreams(ctx, w.streams, &w.trim)
		s.drainOld(ctx, time.Now().Add(-s.o.RecordsRetention))
	}
	claim := time.Since(w.claimAt) > s.o.ClaimIdle/3
	if claim {
		w.claimAt = time.Now()
	}
	reads := s.readAll(ctx, w.streams, groupName, w.consumer, w.groups, claim, workerRead)
	return foundIn(reads, workerRead), !w.handleTraced(ctx, reads)
}

// workerRead bounds the entries the event worker reads from one stream per pass.
const workerRead = 100

// handleReads applies what a pass read. The entries of many streams go together: their records in
// apply.lua calls of up to applyMax (a pass over many owners, each with an event or two, is then a
// call or two, not one per owner), and the streams' acknowledgements in one pipeline after the
// records are written. An entry that does not parse, or the entries of a group whose records kept
// failing through every retry, go through handle one at a time (its retries, then the dead
// letters). false means ctx ended first, or stopAfterRead stopped the worker.
func (w *worker) handleReads(ctx context.Context, reads []read) bool {
	var g applyGroup
	for _, r := range reads {
		if len(r.msgs) == 0 {
			continue
		}
		if w.stopAfterRead != nil && w.stopAfterRead(r.src, len(r.msgs)) {
			w.apply(ctx, &g)
			return false
		}
		var next applyGroup
		next.add(r)
		if len(g.apps) > 0 && len(g.apps)+len(next.apps) > applyMax {
			// This stream's records would overfill the group's last call: the group goes first, and
			// this stream starts the next.
			if !w.apply(ctx, &g) {
				return false
			}
			g = next
			continue
		}
		g.reads, g.apps, g.single = append(g.reads, next.reads...), append(g.apps, next.apps...), append(g.single, next.single...)
	}
	return w.apply(ctx, &g)
}

// applyGroup is what one or more streams' reads apply together.
type applyGroup struct {
	reads  []read        // the entries that parsed, by stream
	apps   []Application // what they write
	single []entryOf     // the entries that did not parse
}

func (g *applyGroup) add(r read) {
	ok := make([]redis.XMessage, 0, len(r.msgs))
	for _, msg := range r.msgs {
		app, err := r.src.kind.Parse(r.src.owner, msg)
		if err != nil {
			g.single = append(g.single, entryOf{r.src, msg})
			continue
		}
		g.apps, ok = append(g.apps, app...), append(ok, msg)
	}
	if len(ok) > 0 {
		g.reads = append(g.reads, read{src: r.src, msgs: ok})
	}
}

// apply writes a group's records (retrying), acknowledges its entries with one pipeline, then
// handles the entries that did not parse one at a time; when the records kept failing, every entry
// of the group goes one at a time instead. false means ctx ended first.
func (w *worker) apply(ctx context.Context, g *applyGroup) bool {
	s := w.s
	acks := make([]held, 0, len(g.reads))
	for _, r := range g.reads {
		h := held{src: r.src, ids: make([]string, len(r.msgs))}
		for i, msg := range r.msgs {
			h.ids[i] = msg.ID
		}
		acks = append(acks, h)
	}
	single := g.single
	if len(g.apps) > 0 {
		err := s.retry(ctx, func() error { return s.applyAll(ctx, g.apps) })
		if ctx.Err() != nil {
			return false
		}
		if err != nil {
			s.logger.Warn("applying a batch of events failed; applying them one by one", "streams", len(g.reads),
				"records", len(g.apps), "error", err.Error())
			for _, r := range g.reads {
				for _, msg := range r.msgs {
					single = append(single, entryOf{r.src, msg})
				}
			}
			acks = nil
		}
	}
	s.ackAll(ctx, groupName, acks)
	for _, e := range single {
		if !w.handle(ctx, e.src, e.msg) {
			return false
		}
	}
	return true
}

// handle applies one entry, retrying with backoff, dead-letters it after the last retry, and
// acknowledges it. false means ctx ended first: the entry stays pending for a later take-over.
func (w *worker) handle(ctx context.Context, src ownerStream, msg redis.XMessage) bool {
	s := w.s
	apply, err := s.applier(src, msg)
	if err == nil {
		err = s.retry(ctx, func() error { return apply(ctx) })
	}
	if ctx.Err() != nil {
		return false
	}
	if err != nil {
		if derr := s.deadLetter(ctx, src, msg, err); derr != nil {
			s.logger.Error("dead-lettering an event failed; it stays pending", "stream", src.String(),
				"entry", msg.ID, "error", derr.Error())
			return true
		}
		s.logger.Warn("event dead-lettered after retries", "stream", src.String(), "entry", msg.ID, "error", err.Error())
	}
	if err := s.client.XAck(ctx, src.stream(), groupName, msg.ID).Err(); err != nil {
		s.logger.Warn("acknowledging an event failed", "stream", src.String(), "entry", msg.ID, "error", err.Error())
	}
	return true
}

// retry calls fn until it succeeds, once more after each wait of Options.Backoff (1 s, 2 s, 4 s), or
// until ctx ends; it returns fn's last error.
func (s *Service) retry(ctx context.Context, fn func() error) error {
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil || ctx.Err() != nil || attempt == len(s.o.Backoff) {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(s.o.Backoff[attempt]):
		}
	}
}

// Worker is the event worker driven one pass at a time, for tools that time the store's side of a
// kind (benchmarks); Run drives its own.
type Worker struct{ w *worker }

// Worker is an event worker of its own consumer name, not running.
func (s *Service) Worker(consumer string) *Worker {
	return &Worker{newWorker(s, consumer)}
}

// Pass reads what is new on every stream once and applies it, as each beat of Run does; it reports
// whether it found anything.
func (w *Worker) Pass(ctx context.Context) bool {
	f, _ := w.w.pass(ctx)
	return f != foundNothing
}

// EnsureStreamGroup creates the worker's consumer group on an event stream, from its first event.
func (s *Service) EnsureStreamGroup(ctx context.Context, stream string) error {
	err := s.client.XGroupCreateMkStream(ctx, stream, groupName, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return err
	}
	return nil
}
