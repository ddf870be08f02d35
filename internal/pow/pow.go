// Package pow is a self-hosted proof-of-work check: edgeq issues a challenge, the visitor's browser
// finds a nonce such that SHA-256 of the challenge followed by the nonce's decimal digits has
// Difficulty leading zero bits, and edgeq checks the answer with one hash and one store write.
//
// A challenge is "<payload>.<mac>", both base64url without padding. The payload is a version byte,
// the expiry (Unix milliseconds), the difficulty and a random id; the MAC (the first 16 bytes of
// HMAC-SHA256) covers the payload and, without writing them in the challenge, what it is bound to:
// its scope (a queue's join, or a route) and the visitor (the caller's binding: host and network, a
// visitor id). A challenge shown to another visitor, used for another queue or route, edited or
// expired is refused without a store call; a solved one is spent by SET NX on its id, so a replayed
// solution is refused by every replica.
package pow

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/group"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/vocab"
)

// Results of a check, the values of the verification counter's result label.
const (
	ResultSuccess      = "success"
	ResultMissing      = "missing"      // no challenge or no nonce
	ResultInvalid      = "invalid"      // not one edgeq issued for this scope and visitor, or malformed
	ResultExpired      = "expired"      // issued, but its life is over
	ResultInsufficient = "insufficient" // the hash has too few leading zero bits
	ResultReplayed     = "replayed"     // solved and used before
	ResultStoreError   = "store_error"  // the single-use write failed
)

// MaxDifficulty bounds the difficulty a challenge may carry: 2^32 hashes on average is hours in a
// browser, so anything above is a configuration mistake.
const MaxDifficulty = 32

// A challenge is exactly one SHA-256 block long (64 bytes: 40 characters of payload, a dot, 23 of
// MAC), so a solver hashes that block once and then one block per nonce, a browser as cheaply as a
// bot's native code: the check does not favour the attacker's optimisations.
const (
	version    = 1
	payloadLen = 1 + 8 + 1 + 20 // version, expiry ms, difficulty, id (numberOf)
	macLen     = 17
	// challengeLen and maxNonceLen bound what a visitor may send before anything is computed.
	challengeLen = 64
	maxNonceLen  = 20 // the digits of a uint64
)

// Checker issues and checks challenges. Safe for concurrent use.
type Checker struct {
	macs  vocab.MAC
	store *store.Store // spends solved challenges; nil keeps no record (tests of the format alone)
	now   func() time.Time
	tag   [4]byte // random: this checker's challenges' series differ from every other replica's

	mu     sync.Mutex
	second int64  // the second of the last challenge issued
	count  uint32 // challenges issued in that second

	// spends groups the single-use writes of concurrent checks into one pipelined round trip
	// (package group): a write alone costs Redis a round trip's system calls, a grouped one a
	// fraction of them. While Run is not running, each write goes alone.
	spends *group.Batcher[struct{}, spend, bool]
}

// spend is one single-use write: SET key NX with a time to live.
type spend struct {
	key string
	ttl time.Duration
}

// spendBatchMax bounds the writes of one round trip.
const spendBatchMax = 256

// New returns a checker whose MACs use key (32 bytes or more) and which spends solutions in st.
func New(key []byte, st *store.Store) *Checker {
	c := &Checker{macs: vocab.NewMAC(key), store: st, now: time.Now}
	rand.Read(c.tag[:])
	c.spends = group.New(spendBatchMax, c.spendNow)
	return c
}

// Run groups concurrent checks' writes until ctx ends.
func (c *Checker) Run(ctx context.Context) { c.spends.Run(ctx) }

// spendNow writes a group of spends in one pipeline; each is true when it was the first.
func (c *Checker) spendNow(ctx context.Context, _ struct{}, reqs []spend) ([]bool, error) {
	pipe := c.store.Client.Pipeline()
	cmds := make([]*redis.BoolCmd, len(reqs))
	for i, r := range reqs {
		cmds[i] = pipe.SetNX(ctx, r.key, 1, r.ttl)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	fresh := make([]bool, len(reqs))
	for i, cmd := range cmds {
		switch err := cmd.Err(); {
		case errors.Is(err, redis.Nil):
		case err != nil:
			return nil, err
		default:
			fresh[i] = cmd.Val()
		}
	}
	return fresh, nil
}

// number fills a challenge's 20-byte id: the second it was issued (4 bytes), this checker's random
// tag (4), the challenge's number among those it issued in that second (4) and 8 random bytes. The
// first 8 name a series and the number is a bit in it, so a caller can spend a challenge by setting
// one bit (Record) rather than keeping a key or a member per challenge.
func (c *Checker) number(id []byte) {
	now := c.now().Unix()
	c.mu.Lock()
	if now != c.second {
		c.second, c.count = now, 0
	}
	n := c.count
	c.count++
	c.mu.Unlock()
	binary.BigEndian.PutUint32(id[0:4], uint32(now)) //nolint:gosec // Unix seconds fit 32 bits until 2106
	copy(id[4:8], c.tag[:])
	binary.BigEndian.PutUint32(id[8:12], n)
	rand.Read(id[12:20])
}

// Record is where a challenge's use is recorded by a caller that spends it itself: bit Bit of the
// series Series (hex), which must be kept until Expires.
type Record struct {
	Series  string
	Bit     int64
	Expires time.Time
}

func recordOf(id []byte, expires time.Time) Record {
	return Record{Series: hex.EncodeToString(id[0:8]), Bit: int64(binary.BigEndian.Uint32(id[8:12])), Expires: expires}
}

// Challenge is what a visitor is given to solve.
type Challenge struct {
	Value      string
	Difficulty int
	Expires    time.Time
}

// Issue makes a challenge of difficulty leading zero bits for scope ("q:QUEUE" or "r:ROUTE") and
// bind (the visitor), valid for ttl.
func (c *Checker) Issue(scope, bind string, difficulty int, ttl time.Duration) Challenge {
	difficulty = min(max(difficulty, 0), MaxDifficulty)
	exp := c.now().Add(ttl)
	var p [payloadLen]byte
	p[0] = version
	binary.BigEndian.PutUint64(p[1:9], uint64(exp.UnixMilli()))
	p[9] = byte(difficulty)
	c.number(p[10:])
	payload := base64.RawURLEncoding.EncodeToString(p[:])
	return Challenge{Value: payload + "." + c.mac(payload, scope, bind), Difficulty: difficulty, Expires: exp}
}

func (c *Checker) mac(payload, scope, bind string) string {
	sum := c.macs.Sum(func(msg []byte) []byte {
		msg = append(append(msg, "edgeq pow v1\x00"...), payload...)
		msg = append(append(append(msg, 0), scope...), 0)
		return append(msg, bind...)
	})
	return base64.RawURLEncoding.EncodeToString(sum[:macLen])
}

// ErrStore is returned with ResultStoreError.
var ErrStore = errors.New("pow: the store did not take the spent challenge")

// Verify checks a solution: the challenge was issued for scope and bind, is unexpired, the nonce (a
// decimal number as sent) makes the hash's leading zero bits at least the challenge's difficulty,
// and it was not used before; it is then spent. It returns one of the Result constants, and an error
// wrapping ErrStore when the store could not be written (the caller decides whether that refuses).
func (c *Checker) Verify(ctx context.Context, challenge, nonce, scope, bind string) (string, error) {
	result, rec := c.Check(challenge, nonce, scope, bind)
	if result != ResultSuccess || c.store == nil {
		return result, nil
	}
	id, expires := rec.Series+":"+strconv.FormatInt(rec.Bit, 10), rec.Expires
	// Kept a second past the expiry: past it the MAC check refuses the challenge anyway. The write
	// does not end with the visitor's connection: it may carry other visitors' writes.
	fresh, err := c.spends.Do(context.WithoutCancel(ctx), struct{}{}, spend{key: UsedKey(c.store.Keys, id), ttl: time.Until(expires) + time.Second})
	switch {
	case err != nil:
		return ResultStoreError, errors.Join(ErrStore, err)
	case !fresh:
		return ResultReplayed, nil
	}
	return ResultSuccess, nil
}

// Check is Verify without the single-use write, for a caller that writes it itself, atomically
// with what it grants: ResultSuccess means issued for scope and bind, unexpired and solved, and rec
// is where its use is to be recorded. No store call.
func (c *Checker) Check(challenge, nonce, scope, bind string) (result string, rec Record) {
	if challenge == "" || nonce == "" {
		return ResultMissing, Record{}
	}
	if len(challenge) != challengeLen || len(nonce) > maxNonceLen || strings.Trim(nonce, "0123456789") != "" {
		return ResultInvalid, Record{}
	}
	payload, mac, ok := strings.Cut(challenge, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(c.mac(payload, scope, bind))) {
		return ResultInvalid, Record{}
	}
	p, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil || len(p) != payloadLen || p[0] != version {
		return ResultInvalid, Record{}
	}
	//nolint:gosec // bits this checker wrote from a UnixMilli and MACed
	exp := time.UnixMilli(int64(binary.BigEndian.Uint64(p[1:9])))
	if !c.now().Before(exp) {
		return ResultExpired, Record{}
	}
	if LeadingZeroBits(Hash(challenge, nonce)) < int(p[9]) {
		return ResultInsufficient, Record{}
	}
	return ResultSuccess, recordOf(p[10:], exp)
}

// UsedKey marks one challenge spent (id as Check gives it); each under a hash tag of its own, so
// spent challenges spread over a Cluster's slots.
func UsedKey(k store.Keys, id string) string {
	return k.Global("pow:"+id, "used")
}

// Hash is SHA-256 of the challenge's bytes followed by the nonce's.
func Hash(challenge, nonce string) [32]byte {
	h := sha256.New()
	h.Write([]byte(challenge))
	h.Write([]byte(nonce))
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// LeadingZeroBits counts the zero bits at the start of sum.
func LeadingZeroBits(sum [32]byte) int {
	n := 0
	for i := 0; i < len(sum); i += 8 {
		w := binary.BigEndian.Uint64(sum[i : i+8])
		if w != 0 {
			return n + bits.LeadingZeros64(w)
		}
		n += 64
	}
	return n
}

// Solve finds the smallest nonce for a challenge of difficulty, as a visitor's page does, from the
// hash state after the challenge's block (tests and the bot's-cost benchmark use it). ctx ends the
// search early (0, false).
func Solve(ctx context.Context, challenge string, difficulty int) (uint64, bool) {
	h := sha256.New()
	h.Write([]byte(challenge))
	mid, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return 0, false
	}
	restore := h.(encoding.BinaryUnmarshaler)
	var buf [maxNonceLen]byte
	var sum [32]byte
	for nonce := uint64(0); ; nonce++ {
		if nonce&0xffff == 0 && ctx.Err() != nil {
			return 0, false
		}
		_ = restore.UnmarshalBinary(mid) // the state this hash marshalled: it restores
		h.Write(strconv.AppendUint(buf[:0], nonce, 10))
		h.Sum(sum[:0])
		if LeadingZeroBits(sum) >= difficulty {
			return nonce, true
		}
	}
}
