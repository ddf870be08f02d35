//go:build !unix

package proxy

import "net"

// idleProbe cannot look at an idle connection without reading it on this platform: pooled
// connections are not reused by the short path here (each request dials).
type idleProbe struct{}

func newIdleProbe(net.Conn) *idleProbe { return &idleProbe{} }

func (*idleProbe) isQuiet() bool { return false }
