package admission

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store"
)

// Trimming the event streams (docs/reference.md "Event streams"). Two consumer groups read every
// stream: the admin-index worker (groupName) and, with the ledger on, the ledger (ledgerGroup). The
// scripts append without a length bound; every replica's worker trims now and then (trimStreams): first
// the entries below the oldest one that a group which is read has not acknowledged (its oldest pending
// entry, or the entry after the last one delivered to it), which loses nothing; then, if the stream is
// still longer than redis.stream_max_entries, the oldest entries whatever was read of them. Those are
// counted (edgeq_stream_trimmed_unread_total, alert EdgeqStreamLostUnread), logged, and kept in a tally
// that `edgeq reconcile` prints: the ledger (or the admin indexes) will never see them.
//
// A group that nobody reads any more (the ledger turned off on every replica) must not hold the streams
// for ever: each reader marks its group read (markGroupRead) at every pass, and a group not marked for
// groupRetireAfter no longer holds anything back; it is logged once as retired. Its entries are then
// trimmed as the other groups acknowledge them, and if it is read again (the ledger turned back on) it
// reads what is left: `edgeq reconcile` lists what it missed.

// groupRetireAfter is how long a consumer group may go unread before it stops holding the streams.
const groupRetireAfter = 10 * time.Minute

// trimFloor is the length below which a stream is not looked at: trimming a short stream saves
// nothing, and the look costs a few commands per stream.
func (s *Service) trimFloor() int64 { return min(s.o.StreamMaxEntries/2, 10_000) }

// groupsKey: the consumer groups that are read, and when each was last (ms): the readers mark theirs.
func groupsKey(k store.Keys) string { return k.Global("adm", "stream_groups") }

// lostKey: per stream, the entries trimmed unread (field = stream key) and when the last were
// (field "at:" + stream key, ms); `edgeq reconcile` prints them. It is kept a week after the last.
func lostKey(k store.Keys) string { return k.Global("adm", "stream_lost") }

// markGroupRead records that this replica reads group now.
func (s *Service) markGroupRead(ctx context.Context, group string) {
	key := groupsKey(s.keys)
	_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, group, time.Now().UnixMilli())
		p.Expire(ctx, key, 24*time.Hour)
		return nil
	})
}

// liveGroups are the groups marked read within groupRetireAfter.
func (s *Service) liveGroups(ctx context.Context) (map[string]bool, error) {
	marks, err := s.client.HGetAll(ctx, groupsKey(s.keys)).Result()
	if err != nil {
		return nil, err
	}
	live := map[string]bool{}
	cutoff := time.Now().Add(-groupRetireAfter).UnixMilli()
	for group, at := range marks {
		if ms, err := strconv.ParseInt(at, 10, 64); err == nil && ms >= cutoff {
			live[group] = true
		}
	}
	return live, nil
}

// trimmer is the worker's state between trims.
type trimmer struct {
	at      time.Time
	retired map[string]bool // groups logged as retired
}

// trimStreams trims every stream once (see the top of this file). A stream it cannot read about is
// left as it is until the next time. Each step is one pipeline over every stream that needs it.
func (s *Service) trimStreams(ctx context.Context, streams [][]ownerStream, t *trimmer) {
	live, err := s.liveGroups(ctx)
	if err != nil {
		return
	}
	type stream struct {
		src     ownerStream
		groups  []redis.XInfoGroup
		pending map[string]*redis.XPendingCmd // group -> its pending summary
		trim    *redis.Cmd
	}
	var all []*stream
	for _, owned := range streams {
		for _, src := range owned {
			all = append(all, &stream{src: src})
		}
	}
	if len(all) == 0 {
		return
	}
	// 1. Lengths: most streams are short and need no more.
	lens := make([]*redis.IntCmd, len(all))
	_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, st := range all {
			lens[i] = p.XLen(ctx, st.src.stream())
		}
		return nil
	})
	var long []*stream
	for i, st := range all {
		if n, err := lens[i].Result(); err == nil && n > s.trimFloor() {
			long = append(long, st)
		}
	}
	if len(long) == 0 {
		return
	}
	// 2. Each long stream's groups.
	infos := make([]*redis.XInfoGroupsCmd, len(long))
	_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, st := range long {
			infos[i] = p.XInfoGroups(ctx, st.src.stream())
		}
		return nil
	})
	// 3. The oldest pending entry of each group that is read and has some.
	_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, st := range long {
			gs, err := infos[i].Result()
			if err != nil {
				continue
			}
			st.groups, st.pending = gs, map[string]*redis.XPendingCmd{}
			for _, g := range gs {
				if live[g.Name] && g.Pending > 0 {
					st.pending[g.Name] = p.XPending(ctx, st.src.stream(), g.Name)
				}
			}
		}
		return nil
	})
	for _, st := range long {
		for _, g := range st.groups {
			if !live[g.Name] && !t.retired[g.Name] {
				t.retired[g.Name] = true
				s.logger.Warn("a consumer group of the event streams has not been read for a while: it no longer holds "+
					"them back, and entries it has not read are trimmed once the other groups have them", "group", g.Name,
					"unread_for_more_than", groupRetireAfter.String())
			}
		}
	}
	// 4. Trim.
	minIDs := make([]string, len(long))
	_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, st := range long {
			if st.pending == nil {
				continue // its groups could not be read: nothing is known about what they read
			}
			minIDs[i] = safeMinID(st.groups, st.pending, live)
			st.trim = trimScript.EvalSha(ctx, p, []string{st.src.stream()}, minIDs[i], s.o.StreamMaxEntries)
		}
		return nil
	})
	for i, st := range long {
		if st.trim == nil {
			continue
		}
		res, err := st.trim.Int64Slice()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			// The first trim after a restart of the store: run it whole (go-redis loads it).
			res, err = trimScript.Run(ctx, s.client, []string{st.src.stream()}, minIDs[i], s.o.StreamMaxEntries).Int64Slice()
		}
		if err != nil || len(res) != 2 || res[1] == 0 {
			continue
		}
		s.lostUnread(ctx, st.src, res[1], st.groups, live)
	}
}

// safeMinID is the id below which every entry of a stream is acknowledged by every group that is
// read: the least, over those groups, of its oldest pending entry (none pending: the entry after the
// last one delivered to it). "" when that is not known: a group that is read has not been created on
// this stream yet (it will read the stream from its start), a summary could not be read, or no group
// that is read has been created on it.
func safeMinID(groups []redis.XInfoGroup, pending map[string]*redis.XPendingCmd, live map[string]bool) string {
	found := map[string]bool{}
	least := ""
	for _, g := range groups {
		if !live[g.Name] {
			continue
		}
		found[g.Name] = true
		var id string
		if cmd := pending[g.Name]; cmd != nil {
			res, err := cmd.Result()
			if err != nil {
				return ""
			}
			id = res.Lower
		} else {
			next, err := nextID(g.LastDeliveredID)
			if err != nil {
				return ""
			}
			id = next
		}
		if least == "" || lessID(id, least) {
			least = id
		}
	}
	for group := range live {
		if !found[group] {
			return ""
		}
	}
	return least
}

// lessID compares two stream ids ("<ms>-<seq>") as numbers.
func lessID(a, b string) bool {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	ami, _ := strconv.ParseUint(am, 10, 64)
	bmi, _ := strconv.ParseUint(bm, 10, 64)
	if ami != bmi {
		return ami < bmi
	}
	asi, _ := strconv.ParseUint(as, 10, 64)
	bsi, _ := strconv.ParseUint(bs, 10, 64)
	return asi < bsi
}

// lostUnread records entries trimmed unread: the metric, a log line, the tally reconcile prints.
func (s *Service) lostUnread(ctx context.Context, src ownerStream, n int64, gs []redis.XInfoGroup, live map[string]bool) {
	s.metrics.trimmedUnread.Add(float64(n))
	var behind []string
	for _, g := range gs {
		if live[g.Name] && (g.Lag > 0 || g.Pending > 0) {
			behind = append(behind, g.Name)
		}
	}
	s.logger.Error("an event stream reached redis.stream_max_entries: its oldest entries were trimmed before every consumer group read them",
		"stream", src.String(), "entries", n, "bound", s.o.StreamMaxEntries, "groups_behind", strings.Join(behind, ","))
	key := lostKey(s.keys)
	_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HIncrBy(ctx, key, src.stream(), n)
		p.HSet(ctx, key, "at:"+src.stream(), time.Now().UnixMilli())
		p.Expire(ctx, key, 7*24*time.Hour)
		return nil
	})
}

// nextID is the stream id right after id ("<ms>-<seq>").
func nextID(id string) (string, error) {
	ms, seq, ok := strings.Cut(id, "-")
	if !ok {
		return "", fmt.Errorf("stream id %q", id)
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil {
		return "", fmt.Errorf("stream id %q", id)
	}
	return ms + "-" + strconv.FormatUint(n+1, 10), nil
}
