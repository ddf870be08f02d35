package waitroom

import (
	"crypto/sha1" //nolint:gosec // the draw must match redis.sha1hex in the Lua scripts; keyed by the secret seed
	"encoding/binary"
	"math/bits"
	"strconv"
)

// lottery is a queue's pre-queue lottery, as drawn at the opening (lib.lua open_if_due): positions
// lo+1 .. lo+n are served in the order of a keyed pseudo-random permutation; every other position's rank
// is its position. n is 0 without a lottery.
type lottery struct {
	lo, n int64
	seed  string
}

// feistelRounds matches the rounds of lib.lua's unpermute.
const feistelRounds = 8

// rank returns the place in serving order of a position.
func (l lottery) rank(pos int64) int64 {
	if l.n <= 0 || pos <= l.lo || pos > l.lo+l.n {
		return pos
	}
	return l.lo + 1 + permute(l.seed, l.n, pos-l.lo-1)
}

// permute maps x in [0, n) to its place in [0, n): an 8-round Feistel network over the smallest
// square power of two holding n, walking the cycle until the result is in range. lib.lua's unpermute
// is its inverse; both use prf.
func permute(seed string, n, x int64) int64 {
	half := int64(2)
	for half*half < n {
		half *= 2
	}
	for {
		l, r := x/half, x%half
		for i := 1; i <= feistelRounds; i++ {
			l, r = r, (l+prf(seed, i, r, half))%half
		}
		x = l*half + r
		if x < n {
			return x
		}
	}
}

// prf is the round function: the first 32 bits of SHA-1 over "seed:round:x", reduced to half. SHA-1 is
// what Redis scripts offer (redis.sha1hex); the key is the secret seed.
func prf(seed string, round int, x, half int64) int64 {
	buf := make([]byte, 0, len(seed)+32)
	buf = append(buf, seed...)
	buf = append(buf, ':')
	buf = strconv.AppendInt(buf, int64(round), 10)
	buf = append(buf, ':')
	buf = strconv.AppendInt(buf, x, 10)
	//nolint:gosec // the draw must match redis.sha1hex in the Lua scripts; keyed by the secret seed
	sum := sha1.Sum(buf)
	return int64(binary.BigEndian.Uint32(sum[:4])) % half
}

// bitset is an immutable set of positions: a replica's knowledge of who was served by a draw (method
// random), shared by every poll without locks. A nil *bitset is empty.
type bitset struct{ words []uint64 }

func (b *bitset) has(pos int64) bool {
	if b == nil || pos < 0 {
		return false
	}
	i := pos / 64
	return i < int64(len(b.words)) && b.words[i]&(1<<(pos%64)) != 0
}

// each calls fn with every position in b, in increasing order.
func (b *bitset) each(fn func(pos int64)) {
	if b == nil {
		return
	}
	for i, w := range b.words {
		for w != 0 {
			fn(int64(i)*64 + int64(bits.TrailingZeros64(w)))
			w &= w - 1
		}
	}
}

// with returns a copy of b holding positions too.
func (b *bitset) with(positions []int64) *bitset {
	var words []uint64
	if b != nil {
		words = b.words
	}
	size := len(words)
	for _, p := range positions {
		size = max(size, int(p/64)+1)
	}
	out := &bitset{words: make([]uint64, size)}
	copy(out.words, words)
	for _, p := range positions {
		out.words[p/64] |= 1 << (p % 64)
	}
	return out
}

// drawnSet follows a queue's drawn string (lib.lua KEYS[10]) from where this replica left off.
type drawnSet struct {
	epoch  string
	offset int64
	set    *bitset
}

// add takes the bytes read from offset from on; a new epoch (the queue was deleted and created again)
// starts over. Ticks may overlap (the background tick, a refresh after a finish): a chunk that starts
// past what is known is dropped (the next tick reads it again), and one that overlaps counts once.
func (d *drawnSet) add(epoch string, from int64, chunk string) {
	if d.epoch != epoch {
		*d = drawnSet{epoch: epoch}
		if from != 0 {
			return
		}
	}
	if from > d.offset || from+int64(len(chunk)) <= d.offset {
		return
	}
	chunk = chunk[d.offset-from:]
	n := len(chunk) / 5
	if n == 0 {
		return
	}
	positions := make([]int64, n)
	for i := range n {
		b := chunk[i*5 : i*5+5]
		positions[i] = int64(b[0])<<32 | int64(b[1])<<24 | int64(b[2])<<16 | int64(b[3])<<8 | int64(b[4])
	}
	d.set = d.set.with(positions)
	d.offset += int64(n * 5)
}
