//go:build unix

package proxy

import (
	"net"
	"syscall"
)

// shortPathAvailable: the short path is taken on this platform (see idleProbe).
const shortPathAvailable = true

// idleProbe tells whether anything has arrived on an idle connection: a byte or the peer's close. It
// peeks without waiting (MSG_PEEK|MSG_DONTWAIT): one system call, and the bytes stay for the next read.
// Built once per connection, so that a probe allocates nothing.
type idleProbe struct {
	raw   syscall.RawConn
	peek  func(fd uintptr) bool
	quiet bool
	buf   [1]byte
}

func newIdleProbe(c net.Conn) *idleProbe {
	p := &idleProbe{}
	if sc, ok := c.(syscall.Conn); ok {
		p.raw, _ = sc.SyscallConn()
	}
	p.peek = func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		p.quiet = n < 0 && (err == syscall.EAGAIN || err == syscall.EWOULDBLOCK)
		return true // an answer either way: never wait for the socket
	}
	return p
}

// isQuiet reports whether nothing arrived: the connection can carry a new request.
func (p *idleProbe) isQuiet() bool {
	if p.raw == nil {
		return false
	}
	p.quiet = false
	return p.raw.Read(p.peek) == nil && p.quiet
}
