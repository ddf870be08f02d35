package vocab

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"testing"
)

// A pooled MAC is HMAC-SHA-256 of the message as written, call after call (the pooled state is reset
// each time). What it saves, allocations included, is BenchmarkMAC's to show: under the race
// detector sync.Pool drops some of what it is given on purpose, so a count here would not hold.
func TestMAC_IsHMACOfTheMessage(t *testing.T) {
	key := []byte("a key of some length")
	m := NewMAC(key)
	for range 2 {
		for _, msg := range []string{"", "edgeq user\x00alice", string(make([]byte, 300)), "short"} {
			want := hmac.New(sha256.New, key)
			want.Write([]byte(msg))
			if got := m.Sum(func(b []byte) []byte { return append(b, msg...) }); !hmac.Equal(got[:], want.Sum(nil)) {
				t.Errorf("Sum(%.20q) = %x, want %x", msg, got, want.Sum(nil))
			}
		}
	}
}

// BenchmarkMAC compares the pooled MAC with an HMAC made for each message.
func BenchmarkMAC(b *testing.B) {
	key := []byte("a key of some length")
	queue, epoch := "drop", "7"
	b.Run("pooled", func(b *testing.B) {
		m := NewMAC(key)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			m.Sum(func(msg []byte) []byte {
				msg = append(append(append(msg, "edgeq request id v1\x00"...), queue...), 0)
				return binary.BigEndian.AppendUint64(append(msg, epoch...), uint64(i))
			})
		}
	})
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			h := hmac.New(sha256.New, key)
			h.Write([]byte("edgeq request id v1\x00" + queue + "\x00" + epoch))
			h.Sum(nil)
		}
	})
}

// DecodeHex takes lower-case hex of exactly the length of dst, and nothing else.
func TestDecodeHex_LowerCaseOfTheLengthOnly(t *testing.T) {
	var b [2]byte
	for s, want := range map[string]bool{"0a9f": true, "0A9F": false, "0a9": false, "0a9f0": false, "0g9f": false, "": false} {
		if got := DecodeHex(b[:], s); got != want || (want && b != [2]byte{0x0a, 0x9f}) {
			t.Errorf("DecodeHex(%q) = %v %x, want %v", s, got, b, want)
		}
	}
}
