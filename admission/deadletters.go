package admission

// Dead letters: the events a worker could not apply to the admin records (worker.go) or write to
// the ledger (ledger.go) through every retry, kept in one hash with their fields and the last error,
// and the admin API that lists them (GET /api/dead-letters), applies one again (retry) or takes one
// out for good (dismiss).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/ledger"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
)

// DeadLetter is an event that failed every retry. Its JSON names the owner by the kind's own field
// ("<owner>_id"), as the admin API has always listed them.
type DeadLetter struct {
	ID       string // "<dead prefix><owner>.<stream entry>"
	Type     string // the admission kind
	Owner    string // the owner whose stream held the event
	StreamID string
	Fields   map[string]string
	Error    string
	FailedAt string
	// Target is what could not be written: "" the admin indexes, "ledger" the ledger.
	Target string

	ownerName string // the kind's owner(): its JSON field is ownerName + "_id"
}

func (d DeadLetter) MarshalJSON() ([]byte, error) {
	m := map[string]any{"id": d.ID, "type": d.Type, "stream_id": d.StreamID, "fields": d.Fields,
		"error": d.Error, "failed_at": d.FailedAt}
	if d.Target != "" {
		m["target"] = d.Target
	}
	if d.ownerName != "" {
		m[d.ownerName+"_id"] = d.Owner
	}
	return json.Marshal(m)
}

// decodeDeadLetter reads a stored dead letter; the kind is the one whose owner field it carries.
func (s *Service) decodeDeadLetter(raw string) (DeadLetter, Kind, error) {
	var m struct {
		ID       string            `json:"id"`
		StreamID string            `json:"stream_id"`
		Fields   map[string]string `json:"fields"`
		Error    string            `json:"error"`
		FailedAt string            `json:"failed_at"`
		Target   string            `json:"target"`
	}
	var owners map[string]any
	if err := errors.Join(json.Unmarshal([]byte(raw), &m), json.Unmarshal([]byte(raw), &owners)); err != nil {
		return DeadLetter{}, nil, err
	}
	d := DeadLetter{ID: m.ID, StreamID: m.StreamID, Fields: m.Fields, Error: m.Error, FailedAt: m.FailedAt, Target: m.Target}
	for _, k := range s.kinds {
		if owner, ok := owners[k.Owner()+"_id"].(string); ok && owner != "" {
			d.Type, d.Owner, d.ownerName = k.Name(), owner, k.Owner()
			return d, k, nil
		}
	}
	return d, nil, fmt.Errorf("dead letter %s names no owner of any kind", m.ID)
}

// targetLedger marks the dead letters of the ledger worker (ledger.go); their ids start "ledger.".
const targetLedger = "ledger"

func (s *Service) deadLetter(ctx context.Context, src ownerStream, msg redis.XMessage, cause error) error {
	return s.deadLetterTo(ctx, "", src, msg, cause)
}

func (s *Service) deadLetterTo(ctx context.Context, target string, src ownerStream, msg redis.XMessage, cause error) error {
	fields := map[string]string{}
	for k, v := range msg.Values {
		fields[k] = fmt.Sprint(v)
	}
	id := src.deadID(msg.ID)
	if target != "" {
		id = target + "." + id
	}
	d := DeadLetter{ID: id, Type: src.kind.Name(), Owner: src.owner, StreamID: msg.ID, Fields: fields,
		Error: cause.Error(), FailedAt: vocab.FormatTime(time.Now()), Target: target, ownerName: src.kind.Owner()}
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

func (s *Service) adminDeadLetters(w http.ResponseWriter, r *http.Request) {
	page, size, e := Paging(r)
	if e != nil {
		s.responder.Error(w, r, e)
		return
	}
	ctx := r.Context()
	total, err := s.client.ZCard(ctx, deadByTimeKey(s.keys)).Result()
	if err != nil {
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	start := (page - 1) * size
	ids, err := s.client.ZRevRange(ctx, deadByTimeKey(s.keys), start, start+size-1).Result()
	items := []DeadLetter{}
	if err == nil && len(ids) > 0 {
		values, err := s.client.HMGet(ctx, deadKey(s.keys), ids...).Result()
		if err == nil {
			for _, v := range values {
				if str, ok := v.(string); ok {
					if d, _, err := s.decodeDeadLetter(str); err == nil {
						items = append(items, d)
					}
				}
			}
		}
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": items, "total_count": total, "page": page, "page_size": size})
}

// adminDismiss removes a dead letter that can never succeed: an operator who decided it, from
// the shop's own records, takes it out of the set (and out of EdgeqDeadLetters). What it was is logged,
// with the operator's request's correlation id, so the decision stays on record.
func (s *Service) adminDismiss(w http.ResponseWriter, r *http.Request) {
	ctx, id := r.Context(), r.PathValue("id")
	var removed *redis.IntCmd
	var body *redis.StringCmd
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		body = p.HGet(ctx, deadKey(s.keys), id)
		removed = p.HDel(ctx, deadKey(s.keys), id)
		p.ZRem(ctx, deadByTimeKey(s.keys), id)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	if removed.Val() == 0 {
		s.responder.Error(w, r, web.ErrDeadLetterNotFound)
		return
	}
	s.metrics.deadLetters.Dec()
	attrs := []any{"id", web.ClipLog(id)}
	if d, _, err := s.decodeDeadLetter(body.Val()); err == nil {
		attrs = append(attrs, "type", d.Type, "owner", d.Owner, "stream_id", d.StreamID, "error", web.ClipLog(d.Error))
	}
	web.RequestFrom(ctx).Logger().Warn("dead letter dismissed by an operator", attrs...)
	w.WriteHeader(http.StatusNoContent)
}

// adminRetry applies a dead-lettered event again; on success it leaves the dead-letter set.
func (s *Service) adminRetry(w http.ResponseWriter, r *http.Request) {
	ctx, id := r.Context(), r.PathValue("id")
	v, err := s.client.HGet(ctx, deadKey(s.keys), id).Result()
	if errors.Is(err, redis.Nil) {
		s.responder.Error(w, r, web.ErrDeadLetterNotFound)
		return
	}
	if err != nil {
		s.responder.Error(w, r, web.ErrStoreUnavailable.Because(err))
		return
	}
	d, k, err := s.decodeDeadLetter(v)
	if err != nil {
		s.responder.Error(w, r, web.ErrDeadLetterRetryFail.Because(err))
		return
	}
	values := map[string]any{}
	for k, val := range d.Fields {
		values[k] = val
	}
	msg, src := redis.XMessage{ID: d.StreamID, Values: values}, ownerStream{kind: k, owner: d.Owner}
	if d.Target == targetLedger {
		var b ledger.Batch
		if s.o.Ledger == nil {
			err = fmt.Errorf("the ledger is off (ledger.postgres_url)")
		} else if err = ledgerRow(src, msg, &b); err == nil {
			err = s.o.Ledger.Write(ctx, b)
		}
	} else {
		var apply func(context.Context) error
		if apply, err = s.applier(src, msg); err == nil {
			err = apply(ctx)
		}
	}
	if err != nil {
		s.responder.Error(w, r, web.ErrDeadLetterRetryFail.With("error", err.Error()).Because(err))
		return
	}
	// The event was retried: a dead letter left behind by a failed removal is retried again, which
	// applies nothing twice (applying is idempotent).
	_, _ = s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HDel(ctx, deadKey(s.keys), id)
		p.ZRem(ctx, deadByTimeKey(s.keys), id)
		return nil
	})
	s.metrics.deadLetters.Dec()
	web.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "retried": true})
}
