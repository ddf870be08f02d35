package admission

// Consuming the event streams, for both of their consumer groups (the event worker's, worker.go, and
// the ledger's, ledger.go): the streams by owner, the passes and their rests, reading every stream
// in one pipeline, creating the groups, and acknowledging what was handled.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ownerStream is one event stream of one owner: its events, or a grouped kind's admissions (admitsStream).
type ownerStream struct {
	kind   Kind
	owner  string
	admits bool // the owner's admissions stream
}

func (src ownerStream) stream() string {
	if src.admits {
		return admitsStream(src.kind, src.owner)
	}
	return src.kind.Stream(src.owner)
}

// deadID names a dead letter: "<dead prefix><owner>.<entry>", or "<dead prefix><owner>.admits.<entry>"
// for a grouped admissions stream (ids hold no dots).
func (src ownerStream) deadID(entry string) string {
	if src.admits {
		return src.kind.DeadPrefix() + src.owner + ".admits." + entry
	}
	return src.kind.DeadPrefix() + src.owner + "." + entry
}

func (src ownerStream) String() string {
	if src.admits {
		return src.kind.Owner() + " " + src.owner + " admissions"
	}
	return src.kind.Owner() + " " + src.owner
}

func consumerName() string {
	host, _ := os.Hostname()
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

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

// ownerStreams lists every event stream, by owner: its events, and a grouped kind's admissions. An owner's streams share its hash tag, so one command reads them all.
func (s *Service) ownerStreams(ctx context.Context, kinds []Kind) ([][]ownerStream, error) {
	var streams [][]ownerStream
	for _, k := range kinds {
		owners, err := s.client.SMembers(ctx, k.OwnersKey()).Result()
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

// held is a pass's entries of one stream, acknowledged together once written.
type held struct {
	src ownerStream
	ids []string
}

// read is what one read gave a consumer from one stream.
type read struct {
	src  ownerStream
	msgs []redis.XMessage
}

// readAll reads up to count new entries of each stream of every owner for a consumer of group: one
// XREADGROUP per owner (an owner's streams share its hash tag), all of them in one pipeline, so an
// idle pass over many owners is one round trip (on a cluster, one per node) instead of one per
// owner; with claim, the take-overs of entries another consumer left pending for ClaimIdle go in
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
// first pass (the kinds make an owner's streams with the event worker's group). It fails on a
// stream that does not exist (one that expired a while after its owner ended; one made by a build
// before the streams were made with their owner): groups notes false, tried again after the
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
			// Without MKSTREAM: a stream that expired after its owner ended must not come back.
			cmds[i] = p.XGroupCreate(ctx, name, group, "0")
		}
		return nil
	})
	for i, c := range cmds {
		err := c.Err()
		groups[names[i]] = err == nil || strings.HasPrefix(err.Error(), "BUSYGROUP")
	}
}
