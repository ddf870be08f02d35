package proxy

import "sync"

// bufferPool implements httputil.BufferPool with a sync.Pool of 32 KiB buffers. The pool holds array
// pointers, which a slice converts to and from without allocating (a *[]byte per Put would be one
// allocation per request).
type bufferPool struct{ pool sync.Pool }

const copyBufferSize = 32 << 10

func NewBufferPool() *bufferPool {
	return &bufferPool{pool: sync.Pool{New: func() any { return new([copyBufferSize]byte) }}}
}

func (b *bufferPool) Get() []byte { return b.pool.Get().(*[copyBufferSize]byte)[:] }

func (b *bufferPool) Put(p []byte) {
	if len(p) == copyBufferSize {
		b.pool.Put((*[copyBufferSize]byte)(p))
	}
}
