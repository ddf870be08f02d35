package waitroom

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"sync"
)

// requestIDs mints and checks request ids. A request id is formatted as a UUID (RFC 9562 version 8,
// "custom") and carries the visitor's position (40 bits) and 82 bits of an HMAC over the queue, the
// queue's epoch and the position. So any replica learns a visitor's position from the id alone,
// without asking Redis — which is what keeps polling cost independent of the number of waiters —
// and nobody can make up an id for a position they were not given. The epoch changes when a queue is
// deleted and created again, which invalidates every id (and token) of the old queue.
type requestIDs struct {
	key []byte
	// macs reuses keyed HMAC states and their buffers: hmac.New is most of the cost of checking an id,
	// and the gate checks one on every request, without allocating.
	macs *sync.Pool
}

type macState struct {
	h        hash.Hash
	msg, sum []byte
}

func newRequestIDs(key []byte) requestIDs {
	return requestIDs{key: key, macs: &sync.Pool{New: func() any {
		return &macState{h: hmac.New(sha256.New, key), msg: make([]byte, 0, 128), sum: make([]byte, 0, sha256.Size)}
	}}}
}

// mac is the HMAC of a position in a queue's incarnation.
func (r requestIDs) mac(queue, epoch string, pos int64) (out [sha256.Size]byte) {
	st := r.macs.Get().(*macState)
	m := append(st.msg[:0], "edgeq request id v1\x00"...)
	m = append(m, queue...)
	m = append(m, 0)
	m = append(m, epoch...)
	m = binary.BigEndian.AppendUint64(m, uint64(pos))
	st.h.Reset()
	st.h.Write(m)
	st.sum = st.h.Sum(st.sum[:0])
	copy(out[:], st.sum)
	st.msg = m[:0]
	r.macs.Put(st)
	return out
}

// make returns the request id of a position.
func (r requestIDs) make(queue, epoch string, pos int64) string {
	var b [16]byte
	var p [8]byte
	binary.BigEndian.PutUint64(p[:], uint64(pos))
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
	pos := int64(binary.BigEndian.Uint64(p[:]))
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
	n := 0
	for i := 0; i < len(s); i += 2 {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			i-- // the dash: the next pair starts after it
			continue
		}
		hi, ok1 := fromHex(s[i])
		lo, ok2 := fromHex(s[i+1])
		if !ok1 || !ok2 {
			return b, false
		}
		b[n] = hi<<4 | lo
		n++
	}
	return b, n == 16
}

// fromHex reads a lower-case hexadecimal digit.
func fromHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
