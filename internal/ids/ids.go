// Package ids makes 64-bit ids that are unique across replicas and ordered by time (admission and bid
// ids): 41 bits of milliseconds since 2025-01-01 UTC, 10 bits of node number, 12 bits of sequence within
// the millisecond. Ids travel as decimal strings.
package ids

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	nodeBits = 10
	seqBits  = 12
	maxNode  = 1<<nodeBits - 1
	maxSeq   = 1<<seqBits - 1
)

// epoch is the zero of the time part: 41 bits of milliseconds last until 2094.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Generator makes ids for one node.
type Generator struct {
	node int64
	now  func() time.Time

	mu     sync.Mutex
	lastMs int64
	seq    int64
}

// New returns a generator for node (0..1023).
func New(node int64) *Generator {
	return &Generator{node: node & maxNode, now: time.Now}
}

// Next returns the next id. Within one millisecond up to 4096 ids are made; beyond that it waits for
// the next millisecond. If the clock steps back, ids keep counting from the last millisecond used, so
// they never repeat.
func (g *Generator) Next() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	ms := g.now().Sub(epoch).Milliseconds()
	if ms < g.lastMs {
		ms = g.lastMs
	}
	if ms == g.lastMs {
		g.seq++
		if g.seq > maxSeq {
			for ms <= g.lastMs {
				time.Sleep(100 * time.Microsecond)
				ms = g.now().Sub(epoch).Milliseconds()
			}
			g.seq = 0
		}
	} else {
		g.seq = 0
	}
	g.lastMs = ms
	//nolint:gosec // ms counts from epoch (never negative), node and seq are masked to their bits
	return uint64(ms)<<(nodeBits+seqBits) | uint64(g.node)<<seqBits | uint64(g.seq)
}

// Node is the node number this generator puts in its ids.
func (g *Generator) Node() int64 { return g.node }

// NodeOf returns the node number of the replica that made an id.
func NodeOf(id uint64) int64 { return int64(id>>seqBits) & maxNode }

// NextString is Next as a decimal string.
func (g *Generator) NextString() string { return strconv.FormatUint(g.Next(), 10) }

// Time returns when an id was made.
func Time(id uint64) time.Time {
	return epoch.Add(time.Duration(id>>(nodeBits+seqBits)) * time.Millisecond)
}

// AtTime is the smallest id made at t: every id made before t is smaller.
func AtTime(t time.Time) uint64 {
	return uint64(max(t.Sub(epoch).Milliseconds(), 0)) << (nodeBits + seqBits)
}

// LeaseNode gives this process a node number from a counter in the store, so replicas sharing the
// store get different numbers (the 1025th process started while the first still runs would share its
// number; ids would still differ unless both made one in the same millisecond with the same sequence).
func LeaseNode(ctx context.Context, client redis.Cmdable, key string) (int64, error) {
	n, err := client.Incr(ctx, key).Result()
	if err != nil {
		return 0, err
	}
	return n & maxNode, nil
}
