package web

import (
	"net/netip"
	"strings"
)

// SplitHost splits a Host header (or the host of a URL) into its name and its port as they are written:
// the one reading of a Host that the proxy's route matching and Host check, the pages' site checks and
// the admin listener share. An IP literal is the part in brackets, brackets kept ("[::1]:443" -> "[::1]",
// ":443"); any other name ends at the first colon ("shop.example:80:90" -> "shop.example", ":80:90"), as
// RFC 3986 reads a host (a name has no colon) and as nginx picks the site. The port keeps its colon and
// is not checked: "" when there is none. A "[" without its "]" is all name. No allocation.
func SplitHost(host string) (name, port string) {
	if strings.HasPrefix(host, "[") {
		if end := strings.IndexByte(host, ']'); end >= 0 {
			return host[:end+1], host[end+1:]
		}
		return host, ""
	}
	if i := strings.IndexByte(host, ':'); i >= 0 {
		return host[:i], host[i:]
	}
	return host, ""
}

// HostName is the name of a Host header as sites are told apart: lower case, without the trailing dot
// of a fully qualified name, without the port and without the brackets of an IPv6 literal (SplitHost).
func HostName(host string) string {
	name, _ := SplitHost(host)
	if len(name) >= 2 && name[0] == '[' && name[len(name)-1] == ']' {
		name = name[1 : len(name)-1]
	}
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

// hostPort is the port of a Host header without its colon, "" if none (SplitHost).
func hostPort(host string) string {
	_, port := SplitHost(host)
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
	name, port := SplitHost(host)
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
func validHostPort(port string) bool { return len(port) <= len(":65535") && ValidPort(port) }

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

// ValidPort reports whether p is "" or ":" followed by digits only.
func ValidPort(p string) bool {
	if p == "" {
		return true
	}
	if p[0] != ':' {
		return false
	}
	for i := 1; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
	}
	return true
}
