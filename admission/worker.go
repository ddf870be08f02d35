package admission

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/money"
	"github.com/edgeq/edgeq/internal/store"
)

// Record is an admission as the admin API shows it, written by the worker from the events.
type Record struct {
	ID         string `json:"id"`
	ProductID  string `json:"product_id"`
	User       string `json:"user"` // pseudonym
	Quantity   int64  `json:"quantity"`
	State      string `json:"state"` // admitted, released
	AdmittedAt string `json:"admitted_at"`
	ReleasedAt string `json:"released_at,omitempty"`
}

// event is one entry of a product's event stream (written by reserve.lua and release.lua).
type event struct {
	Product  string
	StreamID string
	Type     string // admitted or released
	Record   Record
	atMs     int64
}

func parseEvent(product string, msg redis.XMessage) (event, error) {
	str := func(k string) string { v, _ := msg.Values[k].(string); return v }
	num := func(k string) (int64, error) { return strconv.ParseInt(str(k), 10, 64) }
	e := event{Product: product, StreamID: msg.ID, Type: str("type")}
	qty, err1 := num("qty")
	at, err2 := num("at")
	if e.Type != "admitted" && e.Type != "released" || str("admission") == "" || str("user") == "" || errors.Join(err1, err2) != nil {
		return e, fmt.Errorf("malformed event %s: %v", msg.ID, msg.Values)
	}
	e.atMs = at
	e.Record = Record{ID: str("admission"), ProductID: product, User: str("user"), Quantity: qty,
		State: e.Type, AdmittedAt: time.UnixMilli(at).UTC().Format(recordTime)}
	if e.Type == "released" {
		rel, err := num("released_at")
		if err != nil {
			return e, fmt.Errorf("malformed event %s: released_at", msg.ID)
		}
		e.Record.ReleasedAt = time.UnixMilli(rel).UTC().Format(recordTime)
	}
	return e, nil
}

// recordTime formats the times of records: RFC 3339 with milliseconds, fixed width.
const recordTime = "2006-01-02T15:04:05.000Z07:00"

// markerTTL is how long the worker remembers an applied event; redelivery comes far sooner.
const markerTTL = 7 * 24 * time.Hour

// apply writes an event's effects, exactly once: the admission JSON, the index by time, the user's
// index and the sales leaderboard, with a marker, in one MULTI/EXEC under WATCH of the marker. An event
// delivered twice (a consumer took over another's pending entries) finds the marker and changes
// nothing; two consumers racing on one event cannot both commit. An "admitted" entry never overwrites
// a record that exists: if a take-over made the release land first, the admission stays released.
func (s *Service) apply(ctx context.Context, e event) error {
	marker := doneKey(s.keys, e.Product+"/"+e.StreamID)
	body, err := json.Marshal(e.Record)
	if err != nil {
		return err
	}
	record := admissionKey(s.keys, e.Record.ID)
	return s.client.Watch(ctx, func(tx *redis.Tx) error {
		done, err := tx.Exists(ctx, marker).Result()
		if err != nil || done == 1 {
			return err
		}
		exists, err := tx.Exists(ctx, record).Result()
		if err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			if e.Type == "released" || exists == 0 {
				p.Set(ctx, record, body, 0)
			}
			p.ZAdd(ctx, byTimeKey(s.keys), redis.Z{Score: float64(e.atMs), Member: e.Record.ID})
			p.ZAdd(ctx, userKey(s.keys, e.Record.User), redis.Z{Score: float64(e.atMs), Member: e.Record.ID})
			sales := float64(e.Record.Quantity)
			if e.Type == "released" {
				sales = -sales
			}
			p.ZIncrBy(ctx, leaderboardKey(s.keys), sales, e.Product)
			p.Set(ctx, marker, 1, markerTTL)
			return nil
		})
		return err
	}, marker, record)
}

// BidRecord is a bid as the admin API shows it (GET /api/users/{user}/bids), written by the worker.
type BidRecord struct {
	ID          string `json:"id"`
	AuctionID   string `json:"auction_id"`
	Bidder      string `json:"bidder"` // pseudonym
	Amount      string `json:"amount"`
	State       string `json:"state"` // accepted, withdrawn
	BidAt       string `json:"bid_at"`
	WithdrawnAt string `json:"withdrawn_at,omitempty"`
}

// bidEvent is one entry of an auction's event stream (written by bid.lua and withdraw.lua).
type bidEvent struct {
	StreamID string
	Record   BidRecord
	atMs     int64
}

func parseBidEvent(auction string, msg redis.XMessage) (bidEvent, error) {
	str := func(k string) string { v, _ := msg.Values[k].(string); return v }
	num := func(k string) (int64, error) { return strconv.ParseInt(str(k), 10, 64) }
	typ := str("type")
	amount, err1 := num("amount")
	at, err2 := num("at")
	if typ != "bid" && typ != "withdrawn" || str("bid") == "" || str("user") == "" || errors.Join(err1, err2) != nil {
		return bidEvent{}, fmt.Errorf("malformed event %s: %v", msg.ID, msg.Values)
	}
	e := bidEvent{StreamID: msg.ID, atMs: at, Record: BidRecord{ID: str("bid"), AuctionID: auction, Bidder: str("user"),
		Amount: money.Format(amount), State: "accepted", BidAt: time.UnixMilli(at).UTC().Format(recordTime)}}
	if typ == "withdrawn" {
		w, err := num("withdrawn_at")
		if err != nil {
			return e, fmt.Errorf("malformed event %s: withdrawn_at", msg.ID)
		}
		e.Record.State, e.Record.WithdrawnAt = "withdrawn", time.UnixMilli(w).UTC().Format(recordTime)
	}
	return e, nil
}

// applyBid indexes a bid event exactly once, like apply: the bid's JSON and the bidder's list. A
// "bid" entry never overwrites a record that exists: if a take-over made the withdrawal land first,
// the bid stays withdrawn.
func (s *Service) applyBid(ctx context.Context, auction string, e bidEvent) error {
	marker := doneKey(s.keys, "auction."+auction+"/"+e.StreamID)
	record := bidJSONKey(s.keys, e.Record.ID)
	body, err := json.Marshal(e.Record)
	if err != nil {
		return err
	}
	return s.client.Watch(ctx, func(tx *redis.Tx) error {
		n, err := tx.Exists(ctx, marker).Result()
		if err != nil || n == 1 {
			return err
		}
		exists, err := tx.Exists(ctx, record).Result()
		if err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			if e.Record.State == "withdrawn" || exists == 0 {
				p.Set(ctx, record, body, 0)
			}
			p.ZAdd(ctx, userBidsKey(s.keys, e.Record.Bidder), redis.Z{Score: float64(e.atMs), Member: e.Record.ID})
			p.Set(ctx, marker, 1, markerTTL)
			return nil
		})
		return err
	}, marker, record)
}

// applier parses an entry of a stream and returns what applies it.
func (s *Service) applier(src source, msg redis.XMessage) (func(context.Context) error, error) {
	if src.auction {
		e, err := parseBidEvent(src.id, msg)
		return func(ctx context.Context) error { return s.applyBid(ctx, src.id, e) }, err
	}
	e, err := parseEvent(src.id, msg)
	return func(ctx context.Context) error { return s.apply(ctx, e) }, err
}

// Run is the event worker: a consumer of every product's and auction's stream in one consumer group (every replica
// runs one). Entries are acknowledged once applied or dead-lettered; entries left pending by a consumer
// that stopped are taken over after ClaimIdle. It returns when ctx ends.
func (s *Service) Run(ctx context.Context) {
	w := &worker{s: s, consumer: consumerName(), groups: map[string]bool{}}
	var wg sync.WaitGroup
	wg.Go(func() { s.runCompensations(ctx, time.Second) })
	w.run(ctx)
	wg.Wait()
}

type worker struct {
	s        *Service
	consumer string
	groups   map[string]bool // streams whose group this worker made sure of
	streams  []source
	listedAt time.Time
	claimAt  time.Time
	// stopAfterRead, for tests: when it returns true the worker stops after reading entries and before
	// handling them, as if its process died.
	stopAfterRead func(src source, n int) bool
}

// source is one event stream: a product's (admissions) or an auction's (bids).
type source struct {
	auction bool
	id      string
}

func (src source) stream(k store.Keys) string {
	if src.auction {
		return auctionEventsKey(k, src.id)
	}
	return eventsKey(k, src.id)
}

// deadID names a dead letter: "<product>.<entry>" or "auction.<auction>.<entry>" (ids hold no dots).
func (src source) deadID(entry string) string {
	if src.auction {
		return "auction." + src.id + "." + entry
	}
	return src.id + "." + entry
}

func (src source) String() string {
	if src.auction {
		return "auction " + src.id
	}
	return "product " + src.id
}

func consumerName() string {
	host, _ := os.Hostname()
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

func (w *worker) run(ctx context.Context) {
	for ctx.Err() == nil {
		busy, stop := w.pass(ctx)
		if stop {
			return
		}
		if !busy {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// pass reads what is new on every stream once, and now and then takes over stale pending entries.
func (w *worker) pass(ctx context.Context) (busy, stop bool) {
	s := w.s
	if time.Since(w.listedAt) > 5*time.Second {
		products, err1 := s.client.SMembers(ctx, productIndexKey(s.keys)).Result()
		auctions, err2 := s.client.SMembers(ctx, auctionIndexKey(s.keys)).Result()
		if errors.Join(err1, err2) == nil {
			w.streams, w.listedAt = w.streams[:0], time.Now()
			for _, id := range products {
				w.streams = append(w.streams, source{id: id})
			}
			for _, id := range auctions {
				w.streams = append(w.streams, source{auction: true, id: id})
			}
			maps.DeleteFunc(w.groups, func(_ string, ok bool) bool { return !ok }) // another try for those that failed
		}
		if n, err := s.client.HLen(ctx, deadKey(s.keys)).Result(); err == nil {
			s.metrics.deadLetters.Set(float64(n))
		}
	}
	claim := time.Since(w.claimAt) > s.o.ClaimIdle/3
	if claim {
		w.claimAt = time.Now()
	}
	for _, src := range w.streams {
		stream := src.stream(s.keys)
		if done, tried := w.groups[stream]; !done {
			if tried {
				continue // until the next listing
			}
			// Without MKSTREAM: an auction's stream expires a week after its end and must not come back.
			err := s.client.XGroupCreate(ctx, stream, groupName, "0").Err()
			if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
				w.groups[stream] = false
				continue
			}
			w.groups[stream] = true
		}
		res, err := s.client.XReadGroup(ctx, &redis.XReadGroupArgs{
			Group: groupName, Consumer: w.consumer, Streams: []string{stream, ">"}, Count: 100, Block: -1,
		}).Result()
		var msgs []redis.XMessage
		if err == nil && len(res) > 0 {
			msgs = res[0].Messages
		} else if err != nil && strings.HasPrefix(err.Error(), "NOGROUP") {
			delete(w.groups, stream)
		}
		if claim {
			claimed, _, err := s.client.XAutoClaim(ctx, &redis.XAutoClaimArgs{
				Stream: stream, Group: groupName, Consumer: w.consumer, MinIdle: s.o.ClaimIdle, Start: "0-0", Count: 100,
			}).Result()
			if err == nil {
				msgs = append(msgs, claimed...)
			}
		}
		if len(msgs) == 0 {
			continue
		}
		busy = true
		if w.stopAfterRead != nil && w.stopAfterRead(src, len(msgs)) {
			return busy, true
		}
		for _, msg := range msgs {
			if !w.handle(ctx, src, msg) {
				return busy, true
			}
		}
	}
	return busy, false
}

// handle applies one entry, retrying with backoff, dead-letters it after the last retry, and
// acknowledges it. false means ctx ended first: the entry stays pending for a later take-over.
func (w *worker) handle(ctx context.Context, src source, msg redis.XMessage) bool {
	s := w.s
	apply, err := s.applier(src, msg)
	if err == nil {
		for attempt := 0; ; attempt++ {
			if err = apply(ctx); err == nil || ctx.Err() != nil || attempt == len(s.o.Backoff) {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(s.o.Backoff[attempt]):
			}
		}
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
	if err := s.client.XAck(ctx, src.stream(s.keys), groupName, msg.ID).Err(); err != nil {
		s.logger.Warn("acknowledging an event failed", "stream", src.String(), "entry", msg.ID, "error", err.Error())
	}
	return true
}

// DeadLetter is an event that failed every retry.
type DeadLetter struct {
	ID       string            `json:"id"`
	Product  string            `json:"product_id,omitempty"`
	Auction  string            `json:"auction_id,omitempty"`
	StreamID string            `json:"stream_id"`
	Fields   map[string]string `json:"fields"`
	Error    string            `json:"error"`
	FailedAt string            `json:"failed_at"`
}

func (d DeadLetter) source() source {
	if d.Auction != "" {
		return source{auction: true, id: d.Auction}
	}
	return source{id: d.Product}
}

func (s *Service) deadLetter(ctx context.Context, src source, msg redis.XMessage, cause error) error {
	fields := map[string]string{}
	for k, v := range msg.Values {
		fields[k] = fmt.Sprint(v)
	}
	d := DeadLetter{ID: src.deadID(msg.ID), StreamID: msg.ID, Fields: fields,
		Error: cause.Error(), FailedAt: time.Now().UTC().Format(time.RFC3339)}
	if src.auction {
		d.Auction = src.id
	} else {
		d.Product = src.id
	}
	body, _ := json.Marshal(d)
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, deadKey(s.keys), d.ID, body)
		p.ZAdd(ctx, deadByTimeKey(s.keys), redis.Z{Score: float64(time.Now().UnixMilli()), Member: d.ID})
		return nil
	})
	if err == nil {
		s.metrics.deadLetters.Inc()
	}
	return err
}
