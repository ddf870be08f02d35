//go:build !unix

package proxy

import "net"

// shortPathAvailable: the short path needs to look at an idle connection without reading it (a
// non-blocking peek), which this platform's build does not do; every request goes through
// net/http's Transport here.
const shortPathAvailable = false

type idleProbe struct{}

func newIdleProbe(net.Conn) *idleProbe { return &idleProbe{} }

func (*idleProbe) isQuiet() bool { return false }
