package waitroom

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"

	"github.com/edgeq/edgeq/internal/vocab"
)

// requestIDs mints and checks request ids. A request id is formatted as a UUID (RFC 9562 version 8,
// "custom") and carries the visitor's position (40 bits) and 82 bits of an HMAC over the queue, the
// queue's epoch and the position. So any replica learns a visitor's position from the id alone,
// without asking Redis — which is what keeps polling cost independent of the number of waiters —
// and nobody can make up an id for a position they were not given. The epoch changes when a queue is
// deleted and created again, which invalidates every id (and token) of the old queue.
type requestIDs struct {
	// macs reuses keyed HMAC states and their buffers (vocab.MAC): the gate checks an id on every
	// request, without allocating.
	macs vocab.MAC
}

func newRequestIDs(key []byte) requestIDs { return requestIDs{macs: vocab.NewMAC(key)} }

// mac is the HMAC of a position in a queue's incarnation.
func (r requestIDs) mac(queue, epoch string, pos int64) [sha256.Size]byte {
	return r.macs.Sum(func(m []byte) []byte {
		m = append(append(append(m, "edgeq request id v1\x00"...), queue...), 0)
		return binary.BigEndian.AppendUint64(append(m, epoch...), uint64(pos)) //nolint:gosec // the bits of the int64, hashed
	})
}

// make returns the request id of a position.
func (r requestIDs) make(queue, epoch string, pos int64) string {
	var b [16]byte
	var p [8]byte
	binary.BigEndian.PutUint64(p[:], uint64(pos)) //nolint:gosec // positions are >= 1; their low 40 bits are kept
	copy(b[0:5], p[3:8])
	sum := r.mac(queue, epoch, pos)
	copy(b[5:16], sum[:])
	b[6] = b[6]&0x0f | 0x80 // version 8
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	return formatUUID(b)
}

// position returns the position a request id was minted for, if it is genuine for queue and epoch.
func (r requestIDs) position(queue, epoch, id string) (int64, bool) {
	b, ok := parseUUID(id)
	if !ok || b[6]>>4 != 8 || b[8]>>6 != 2 {
		return 0, false
	}
	var p [8]byte
	copy(p[3:8], b[0:5])
	pos := int64(binary.BigEndian.Uint64(p[:])) //nolint:gosec // 40 bits read back: always fits
	if pos < 1 {
		return 0, false
	}
	want := r.mac(queue, epoch, pos)
	want[1] = want[1]&0x0f | 0x80
	want[3] = want[3]&0x3f | 0x80
	if !hmac.Equal(b[5:16], want[:11]) {
		return 0, false
	}
	return pos, true
}

func formatUUID(b [16]byte) string {
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:36], b[10:16])
	return string(out[:])
}

// parseUUID accepts exactly the canonical lower-case 8-4-4-4-12 form.
func parseUUID(s string) ([16]byte, bool) {
	var b [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return b, false
	}
	ok := vocab.DecodeHex(b[0:4], s[0:8]) && vocab.DecodeHex(b[4:6], s[9:13]) && vocab.DecodeHex(b[6:8], s[14:18]) &&
		vocab.DecodeHex(b[8:10], s[19:23]) && vocab.DecodeHex(b[10:16], s[24:36])
	return b, ok
}
