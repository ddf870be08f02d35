package vocab

import "strings"

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

// HostName is the name of a Host header as sites are told apart, the one canonical form of a host:
// lower case (host names are case-insensitive), without the trailing dot of a fully qualified name,
// without the port and without the brackets of an IPv6 literal (SplitHost). It does not allocate
// when the name is already canonical.
func HostName(host string) string {
	name, _ := SplitHost(host)
	return CanonicalName(name)
}

// CanonicalName is HostName of a name SplitHost has already split off its port: for a caller that
// needs the port too, and so splits once.
func CanonicalName(name string) string {
	if len(name) >= 2 && name[0] == '[' && name[len(name)-1] == ']' {
		name = name[1 : len(name)-1]
	}
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

// ValidPort reports whether p, a port as SplitHost returns it, is "" or ":" followed by digits only.
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
