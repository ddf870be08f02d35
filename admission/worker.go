package admission

// The event worker: every replica's consumer of every product's and auction's streams, all in one
// consumer group. Each pass reads what is new on every stream in one pipeline, now and then takes
// over the entries another consumer left pending, applies what it read (apply.go) and acknowledges
// it; an entry that fails every retry is dead-lettered (deadletters.go).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Run is the event worker: a consumer of every product's and auction's stream in one consumer group (every replica
// runs one). Entries are acknowledged once applied or dead-lettered; entries left pending by a consumer
// that stopped are taken over after ClaimIdle. It returns when ctx ends.
func (s *Service) Run(ctx context.Context) {
	w := &worker{s: s, consumer: consumerName(), groups: map[string]bool{}, trim: trimmer{retired: map[string]bool{}}}
	var wg sync.WaitGroup
	wg.Go(func() { s.runCompensations(ctx, time.Second) })
	wg.Go(func() { s.runCommitter(ctx) })
	wg.Go(func() { s.reserves.Run(ctx) })
	wg.Go(func() { s.bids.Run(ctx) })
	wg.Go(func() { s.runLease(ctx) })
	wg.Go(func() { s.runSpellingsIndex(ctx) })
	wg.Go(func() { s.runReport(ctx, 250*time.Millisecond) })
	if s.o.Ledger != nil {
		wg.Go(func() { s.runLedger(ctx) })
	}
	w.run(ctx)
	wg.Wait()
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

// ownerStream is one event stream of one owner: a product's events or admissions (admitsKey), or an auction's events.
type ownerStream struct {
	kind   kind
	owner  string
	admits bool // the owner's admissions stream
}

func (src ownerStream) stream() string {
	if src.admits {
		return admitsStream(src.kind, src.owner)
	}
	return src.kind.stream(src.owner)
}

// deadID names a dead letter: "<product>.<entry>", "<product>.admits.<entry>" or
// "auction.<auction>.<entry>" (ids hold no dots).
func (src ownerStream) deadID(entry string) string {
	if src.admits {
		return src.kind.deadPrefix() + src.owner + ".admits." + entry
	}
	return src.kind.deadPrefix() + src.owner + "." + entry
}

func (src ownerStream) String() string {
	if src.admits {
		return src.kind.owner() + " " + src.owner + " admissions"
	}
	return src.kind.owner() + " " + src.owner
}

func consumerName() string {
	host, _ := os.Hostname()
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

func (w *worker) run(ctx context.Context) { runPasses(ctx, w.pass) }

// found is what a worker's pass read.
type found int

const (
	foundNothing found = iota // rest idleRest
	foundSome                 // rest busyRest
	foundFull                 // some stream gave as many entries as a pass reads: a backlog, go on at once
)

const (
	idleRest = 100 * time.Millisecond
	// busyRest: under load a pass that read what came in since the last one rests this long, so
	// the next reads what gathered meanwhile: fewer, fuller reads, apply calls and acknowledgements
	// (each a round trip and a script call's fixed cost for Redis) for the admin views' few
	// milliseconds more of lag. A backlog is read without rest.
	busyRest = 25 * time.Millisecond
)

// runPasses runs a worker's passes until ctx ends or a pass says stop, resting after a pass as what
// it found says.
func runPasses(ctx context.Context, pass func(context.Context) (found, bool)) {
	for ctx.Err() == nil {
		f, stop := pass(ctx)
		if stop {
			return
		}
		rest := idleRest
		switch f {
		case foundFull:
			continue
		case foundSome:
			rest = busyRest
		}
		select {
		case <-ctx.Done():
		case <-time.After(rest):
		}
	}
}

// foundIn says what a pass found in its reads (count entries at most per stream).
func foundIn(reads []read, count int64) found {
	f := foundNothing
	for _, r := range reads {
		switch {
		case int64(len(r.msgs)) >= count:
			return foundFull
		case len(r.msgs) > 0:
			f = foundSome
		}
	}
	return f
}

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
		if n, err := s.unsettledCount(ctx, time.Now().Add(-UnsettledAfter)); err == nil {
			s.metrics.unsettled.Set(float64(n))
		}
		s.sweepOrphans(ctx)
	}
	if time.Since(w.trim.at) > s.o.TrimEvery {
		w.trim.at = time.Now()
		s.markGroupRead(ctx, groupName)
		s.trimStreams(ctx, w.streams, &w.trim)
	}
	claim := time.Since(w.claimAt) > s.o.ClaimIdle/3
	if claim {
		w.claimAt = time.Now()
	}
	reads := s.readAll(ctx, w.streams, groupName, w.consumer, w.groups, claim, workerRead)
	return foundIn(reads, workerRead), !w.handleReads(ctx, reads)
}

// workerRead bounds the entries the event worker reads from one stream per pass.
const workerRead = 100

// ownerStreams lists every event stream, by owner: each product's two (events, admits) and each
// auction's one. An owner's streams share its hash tag, so one command reads them all.
func (s *Service) ownerStreams(ctx context.Context, kinds []kind) ([][]ownerStream, error) {
	var streams [][]ownerStream
	for _, k := range kinds {
		owners, err := s.client.SMembers(ctx, k.ownersKey()).Result()
		if err != nil {
			return nil, err
		}
		for _, id := range owners {
			owned := []ownerStream{{kind: k, owner: id}}
			if admitsStream(k, id) != "" {
				owned = append(owned, ownerStream{kind: k, owner: id, admits: true})
			}
			streams = append(streams, owned)
		}
	}
	return streams, nil
}

// read is what one read gave a consumer from one stream.
type read struct {
	src  ownerStream
	msgs []redis.XMessage
}

// readAll reads up to count new entries of each stream of every owner for a consumer of group: one
// XREADGROUP per owner (an owner's streams share its hash tag), all of them in one pipeline, so an
// idle pass over many products is one round trip (on a cluster, one per node) instead of one per
// product; with claim, the take-overs of entries another consumer left pending for ClaimIdle go in
// the same pipeline. Streams without the group yet get it first (createGroups).
func (s *Service) readAll(ctx context.Context, streams [][]ownerStream, group, consumer string, groups map[string]bool, claim bool, count int64) []read {
	s.createGroups(ctx, streams, group, groups)
	reads := make([]read, 0, 2*len(streams))
	var owners [][2]int // each owner's reads: reads[o[0]:o[1]]
	for _, owned := range streams {
		first := len(reads)
		for _, src := range owned {
			if groups[src.stream()] {
				reads = append(reads, read{src: src})
			}
		}
		if len(reads) > first {
			owners = append(owners, [2]int{first, len(reads)})
		}
	}
	if len(reads) == 0 {
		return nil
	}
	cmds := make([]*redis.XStreamSliceCmd, len(owners))
	var claims []*redis.XAutoClaimCmd
	if claim {
		claims = make([]*redis.XAutoClaimCmd, len(reads))
	}
	// Each command's own error is read below (an empty read is redis.Nil).
	_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		args := make([]string, 2*len(reads)) // an owner's streams, then as many ">"
		for i, o := range owners {
			n := o[1] - o[0]
			mine := args[2*o[0] : 2*o[1]]
			for j, r := range reads[o[0]:o[1]] {
				mine[j], mine[n+j] = r.src.stream(), ">"
			}
			cmds[i] = p.XReadGroup(ctx, &redis.XReadGroupArgs{
				Group: group, Consumer: consumer, Streams: mine, Count: count, Block: -1,
			})
		}
		for i := range claims {
			claims[i] = p.XAutoClaim(ctx, &redis.XAutoClaimArgs{
				Stream: reads[i].src.stream(), Group: group, Consumer: consumer, MinIdle: s.o.ClaimIdle, Start: "0-0", Count: count,
			})
		}
		return nil
	})
	for i, o := range owners {
		mine := reads[o[0]:o[1]]
		res, err := cmds[i].Result()
		if err != nil {
			if strings.HasPrefix(err.Error(), "NOGROUP") {
				for _, r := range mine {
					delete(groups, r.src.stream()) // created again next pass
				}
			}
			continue
		}
		for _, st := range res {
			for j := range mine {
				if mine[j].src.stream() == st.Stream {
					mine[j].msgs = st.Messages
				}
			}
		}
	}
	for i, c := range claims {
		if claimed, _, err := c.Result(); err == nil {
			reads[i].msgs = append(reads[i].msgs, claimed...)
		}
	}
	return reads
}

// ackAll acknowledges, for a consumer group, the entries handled from each stream: one XACK per
// stream, all in one pipeline (on a cluster, one per node). A failed acknowledgement leaves the
// entries pending: a take-over handles them again, which changes nothing.
func (s *Service) ackAll(ctx context.Context, group string, handled []held) {
	if len(handled) == 0 {
		return
	}
	cmds := make([]*redis.IntCmd, len(handled))
	_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, h := range handled {
			cmds[i] = p.XAck(ctx, h.src.stream(), group, h.ids...)
		}
		return nil
	})
	for i, c := range cmds {
		if err := c.Err(); err != nil {
			s.logger.Warn("acknowledging events failed; they stay pending, to be handled again (which changes nothing)",
				"group", group, "stream", handled[i].src.String(), "entries", len(handled[i].ids), "error", err.Error())
		}
	}
}

// createGroups creates group, from the stream's first entry, on each stream that groups does not
// know yet, with one pipeline, and notes which exist: the ledger's group on every stream at its
// first pass (a product's and an auction's streams are made with the event worker's group). It
// fails on a stream that does not exist (an auction's, a week after its end; a product's made by a
// build before the streams were made with the product): groups notes false, tried again after the
// next listing.
func (s *Service) createGroups(ctx context.Context, streams [][]ownerStream, group string, groups map[string]bool) {
	var names []string
	for _, owned := range streams {
		for _, src := range owned {
			if _, tried := groups[src.stream()]; !tried {
				names = append(names, src.stream())
			}
		}
	}
	if len(names) == 0 {
		return
	}
	cmds := make([]*redis.StatusCmd, len(names))
	_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, name := range names {
			// Without MKSTREAM: an auction's stream expires a week after its end and must not come back.
			cmds[i] = p.XGroupCreate(ctx, name, group, "0")
		}
		return nil
	})
	for i, c := range cmds {
		err := c.Err()
		groups[names[i]] = err == nil || strings.HasPrefix(err.Error(), "BUSYGROUP")
	}
}

// handleReads applies what a pass read. The entries of many streams go together: their records in
// apply.lua calls of up to applyMax (a pass over many auctions, each with a bid or two, is then a
// call or two, not one per auction), and the streams' acknowledgements in one pipeline after the
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
	apps   []application // what they write
	single []entryOf     // the entries that did not parse
}

func (g *applyGroup) add(r read) {
	ok := make([]redis.XMessage, 0, len(r.msgs))
	for _, msg := range r.msgs {
		app, err := r.src.kind.parse(r.src.owner, msg)
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
