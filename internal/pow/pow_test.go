package pow

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func solved(t *testing.T, c Challenge) string {
	t.Helper()
	nonce, ok := Solve(context.Background(), c.Value, c.Difficulty)
	if !ok {
		t.Fatal("no solution")
	}
	return strconv.FormatUint(nonce, 10)
}

// A solution passes once, on either replica's checker; what is not the issued challenge for this
// scope and visitor, expired, short of the difficulty or malformed is refused before the store.
func TestVerify(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		a, b := New(testKey, s), New(testKey, s)
		ch := a.Issue("q:drop", "shop.test|192.0.2.0/24", 12, time.Minute)
		if len(ch.Value) != 64 {
			t.Fatalf("a challenge of %d bytes, want one SHA-256 block: %q", len(ch.Value), ch.Value)
		}
		nonce := solved(t, ch)
		if got := LeadingZeroBits(Hash(ch.Value, nonce)); got < 12 {
			t.Fatalf("Solve found %d zero bits", got)
		}
		cases := []struct {
			name, challenge, nonce, scope, bind, want string
		}{
			{"another queue", ch.Value, nonce, "q:other", "shop.test|192.0.2.0/24", ResultInvalid},
			{"a route", ch.Value, nonce, "r:drop", "shop.test|192.0.2.0/24", ResultInvalid},
			{"another visitor", ch.Value, nonce, "q:drop", "shop.test|198.51.100.0/24", ResultInvalid},
			{"no nonce", ch.Value, "", "q:drop", "shop.test|192.0.2.0/24", ResultMissing},
			{"no challenge", "", nonce, "q:drop", "shop.test|192.0.2.0/24", ResultMissing},
			{"a nonce not decimal", ch.Value, "0x1f", "q:drop", "shop.test|192.0.2.0/24", ResultInvalid},
			{"a nonce too long", ch.Value, "123456789012345678901", "q:drop", "shop.test|192.0.2.0/24", ResultInvalid},
			{"an edited challenge", edited(ch.Value), nonce, "q:drop", "shop.test|192.0.2.0/24", ResultInvalid},
			{"no dot", "abc", nonce, "q:drop", "shop.test|192.0.2.0/24", ResultInvalid},
		}
		for _, c := range cases {
			if got, err := b.Verify(ctx, c.challenge, c.nonce, c.scope, c.bind); got != c.want || err != nil {
				t.Errorf("%s: %s %v, want %s", c.name, got, err, c.want)
			}
		}
		// A nonce with too few zero bits: the first one that misses.
		for n := uint64(0); ; n++ {
			s := strconv.FormatUint(n, 10)
			if LeadingZeroBits(Hash(ch.Value, s)) < 12 {
				if got, _ := b.Verify(ctx, ch.Value, s, "q:drop", "shop.test|192.0.2.0/24"); got != ResultInsufficient {
					t.Fatalf("a weak nonce: %s", got)
				}
				break
			}
		}
		if got, err := b.Verify(ctx, ch.Value, nonce, "q:drop", "shop.test|192.0.2.0/24"); got != ResultSuccess || err != nil {
			t.Fatalf("the solution on replica b: %s %v", got, err)
		}
		if got, _ := a.Verify(ctx, ch.Value, nonce, "q:drop", "shop.test|192.0.2.0/24"); got != ResultReplayed {
			t.Fatalf("replayed on replica a: %s", got)
		}

		// Expired: a checker whose clock is past the expiry.
		late := New(testKey, s)
		old := a.Issue("q:drop", "v", 4, time.Second)
		late.now = func() time.Time { return time.Now().Add(2 * time.Second) }
		if got, _ := late.Verify(ctx, old.Value, solved(t, old), "q:drop", "v"); got != ResultExpired {
			t.Fatalf("expired: %s", got)
		}
		// Another key: nothing it issued passes.
		other := New([]byte("another key, another deployment.."), s).Issue("q:drop", "v", 4, time.Minute)
		if got, _ := a.Verify(ctx, other.Value, solved(t, other), "q:drop", "v"); got != ResultInvalid {
			t.Fatalf("another key's challenge: %s", got)
		}
	})
}

// edited changes one character of the payload (its expiry).
func edited(v string) string {
	c := byte('A')
	if v[5] == 'A' {
		c = 'B'
	}
	return v[:5] + string(c) + v[6:]
}

// Many goroutines on two checkers race to spend one solution: exactly one wins.
func TestVerify_OneWinnerUnderConcurrency(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		checkers := []*Checker{New(testKey, s), New(testKey, s)}
		ch := checkers[0].Issue("r:checkout", "v", 8, time.Minute)
		nonce := solved(t, ch)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range 64 {
			wg.Go(func() {
				if got, err := checkers[i%2].Verify(context.Background(), ch.Value, nonce, "r:checkout", "v"); err != nil {
					t.Error(err)
				} else if got == ResultSuccess {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Fatalf("%d winners, want 1", n)
		}
	})
}

// The store down: the check says so rather than passing.
func TestVerify_StoreDown(t *testing.T) {
	s := storetest.Embedded(t)
	c := New(testKey, s)
	ch := c.Issue("q:drop", "v", 4, time.Minute)
	nonce := solved(t, ch)
	s.Client.Close()
	if got, err := c.Verify(context.Background(), ch.Value, nonce, "q:drop", "v"); got != ResultStoreError || err == nil {
		t.Fatalf("store down: %s %v", got, err)
	}
}

func TestLeadingZeroBits(t *testing.T) {
	var sum [32]byte
	if got := LeadingZeroBits(sum); got != 256 {
		t.Fatalf("all zero: %d", got)
	}
	sum[0] = 0x80
	if got := LeadingZeroBits(sum); got != 0 {
		t.Fatalf("0x80: %d", got)
	}
	sum[0], sum[1] = 0, 0x10
	if got := LeadingZeroBits(sum); got != 11 {
		t.Fatalf("00 10: %d", got)
	}
	sum[1], sum[9] = 0, 0x01
	if got := LeadingZeroBits(sum); got != 79 {
		t.Fatalf("9 zero bytes then 0x01: %d", got)
	}
}

func TestAdaptive(t *testing.T) {
	a := Adaptive{Floor: 16, Ceiling: 20, JoinsPerSecond: 100}
	for _, c := range []struct {
		rate float64
		want int
	}{{0, 16}, {100, 16}, {101, 17}, {200, 17}, {201, 18}, {400, 18}, {800, 19}, {1600, 20}, {1e9, 20}} {
		if got := a.Difficulty(c.rate); got != c.want {
			t.Errorf("%v joins/s: %d, want %d", c.rate, got, c.want)
		}
	}
	if got := (Adaptive{Floor: 16}).Difficulty(1e6); got != 16 {
		t.Errorf("without a ceiling: %d", got)
	}
}

// The bot's side: hashes per second of native Go, one core. A place at difficulty d costs 2^d hashes
// on average; docs/security.md turns this into CPU seconds and money per 1,000 places.
func BenchmarkHash(b *testing.B) {
	c := New(testKey, nil).Issue("q:drop", "v", 0, time.Minute).Value
	var buf [maxNonceLen]byte
	for i := range b.N {
		Hash(c, string(strconv.AppendUint(buf[:0], uint64(i), 10)))
	}
}

// BenchmarkSolve16 solves whole challenges of difficulty 16: the mean is 2^16 hashes.
func BenchmarkSolve16(b *testing.B) {
	c := New(testKey, nil)
	for range b.N {
		ch := c.Issue("q:drop", "v", 16, time.Minute)
		Solve(context.Background(), ch.Value, 16)
	}
}

// A challenge's MAC is HMAC-SHA-256 under the key of "edgeq pow v1", the payload, the scope and the
// visitor, NUL-separated, cut to macLen and base64url: what replicas of every build issue and check,
// so a challenge fetched from one is accepted by another during a rolling update.
func TestIssue_TheMACOfTheFormat(t *testing.T) {
	ch := New(testKey, nil).Issue("q:drop", "visitor", 3, time.Minute)
	payload, mac, ok := strings.Cut(ch.Value, ".")
	if !ok {
		t.Fatalf("challenge %q has no MAC", ch.Value)
	}
	h := hmac.New(sha256.New, testKey)
	h.Write([]byte("edgeq pow v1\x00" + payload + "\x00q:drop\x00visitor"))
	if want := base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:macLen]); mac != want {
		t.Fatalf("MAC %q, want %q", mac, want)
	}
}

// BenchmarkIssueAndCheck is edgeq's side of one proof-of-work join without the store: a challenge
// issued (GET pow_challenge) and its solution checked (the join), difficulty 0 so that no solving
// is measured.
func BenchmarkIssueAndCheck(b *testing.B) {
	c := New(testKey, nil)
	b.ReportAllocs()
	for range b.N {
		ch := c.Issue("q:drop", "visitor", 0, time.Minute)
		if result, _ := c.Check(ch.Value, "1", "q:drop", "visitor"); result != ResultSuccess {
			b.Fatal(result)
		}
	}
}
