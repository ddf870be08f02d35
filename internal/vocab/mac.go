package vocab

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"sync"
)

// MAC is a keyed HMAC-SHA-256 that reuses its states: hmac.New is most of the cost of one MAC, and
// the hot paths (a request id checked on every gated request, a pseudonym per admission, a client
// address per join) compute one each time, without allocating. Safe for concurrent use; the zero MAC
// is not usable (NewMAC).
type MAC struct{ states *sync.Pool }

// macState is one pooled HMAC with the buffers of its message and its sum.
type macState struct {
	h        hash.Hash
	msg, sum []byte
}

// NewMAC returns the MAC keyed with key.
func NewMAC(key []byte) MAC {
	return MAC{states: &sync.Pool{New: func() any {
		return &macState{h: hmac.New(sha256.New, key), msg: make([]byte, 0, 128), sum: make([]byte, 0, sha256.Size)}
	}}}
}

// Sum returns the HMAC of the message that write appends to msg, an empty buffer reused from call to
// call (write returns the buffer it appended to, as append does). Neither msg nor anything write
// appends escapes, so a write that only appends costs no allocation.
func (m MAC) Sum(write func(msg []byte) []byte) (out [sha256.Size]byte) {
	st := m.states.Get().(*macState)
	msg := write(st.msg[:0])
	st.h.Reset()
	st.h.Write(msg)
	st.sum = st.h.Sum(st.sum[:0])
	copy(out[:], st.sum)
	st.msg = msg[:0]
	m.states.Put(st)
	return out
}
