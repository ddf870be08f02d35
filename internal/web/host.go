package web

import (
	"net/netip"
	"strings"

	"github.com/edgeq/edgeq/internal/vocab"
)

// hostPort is the port of a Host header without its colon, "" if none (vocab.SplitHost).
func hostPort(host string) string {
	_, port := vocab.SplitHost(host)
	return strings.TrimPrefix(port, ":")
}

// ErrInvalidHost refuses a Host header that is not a host name or an IP literal with an optional
// port (ValidHost), on either listener.
var ErrInvalidHost = ErrInvalidRequest.With("field", "host").
	With("problems", "the Host header must be a host name (letters, digits, hyphens, dots) or an IP address, with an optional port")

// ValidHost reports whether host is a host name or an IP literal, then optionally ":" and at most
// five digits. A name is labels of letters, digits and hyphens, 1-63 bytes each, joined by dots, at
// most 253 bytes, with one trailing dot allowed (RFC 1123 section 2.1; an IPv4 address is such a
// name); an IP literal is an IPv6 address without a zone in brackets (RFC 3986 section 3.2.2).
func ValidHost(host string) bool {
	name, port := vocab.SplitHost(host)
	if strings.HasPrefix(name, "[") {
		if len(name) < 2 || name[len(name)-1] != ']' {
			return false // no "]"
		}
		a, err := netip.ParseAddr(name[1 : len(name)-1])
		return err == nil && a.Is6() && a.Zone() == "" && validHostPort(port)
	}
	return validHostName(name) && validHostPort(port)
}

// validHostPort reports whether port is "" or ":" and at most five digits.
func validHostPort(port string) bool { return len(port) <= len(":65535") && vocab.ValidPort(port) }

// validHostName reports whether name is a host name: see validHost.
func validHostName(name string) bool {
	name = strings.TrimSuffix(name, ".")
	if name == "" || len(name) > 253 {
		return false
	}
	label := 0
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '.':
			if label == 0 {
				return false
			}
			label = 0
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-':
			if label++; label > 63 {
				return false
			}
		default:
			return false
		}
	}
	return label > 0
}
