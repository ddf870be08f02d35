package vocab

import "testing"

// One reading of a Host header: where the name ends and the port starts (SplitHost), and the name as
// sites are told apart (HostName).
func TestSplitHost_AndHostName(t *testing.T) {
	cases := []struct {
		host, name, port, hostName string
	}{
		{"example.com", "example.com", "", "example.com"},
		{"EXAMPLE.com:8080", "EXAMPLE.com", ":8080", "example.com"},
		{"[::1]:443", "[::1]", ":443", "::1"},
		{"[::1]", "[::1]", "", "::1"},
		{"[2001:DB8::1]:443", "[2001:DB8::1]", ":443", "2001:db8::1"},
		{"", "", "", ""},
		// The trailing dot of a fully qualified name is the same site; two dots are not.
		{"shop.example.", "shop.example.", "", "shop.example"},
		{"SHOP.example.:8080", "SHOP.example.", ":8080", "shop.example"},
		{"shop.example..", "shop.example..", "", "shop.example."},
		{"127.0.0.1:80", "127.0.0.1", ":80", "127.0.0.1"},
		// A colon with no port, and ports that are none: the name still ends at the first colon.
		{"shop.example:", "shop.example", ":", "shop.example"},
		{"shop.example:80:90", "shop.example", ":80:90", "shop.example"},
		{"::1", "", "::1", ""},
		// Whatever follows "]" is the port, checked or not by the caller; "[" without "]" is all name.
		{"[FE80::1]x", "[FE80::1]", "x", "fe80::1"},
		{"[::1", "[::1", "", "[::1"},
		{"[]", "[]", "", ""},
	}
	for _, c := range cases {
		name, port := SplitHost(c.host)
		if name != c.name || port != c.port {
			t.Errorf("SplitHost(%q) = %q, %q; want %q, %q", c.host, name, port, c.name, c.port)
		}
		if got := HostName(c.host); got != c.hostName {
			t.Errorf("HostName(%q) = %q, want %q", c.host, got, c.hostName)
		}
	}
	if n := testing.AllocsPerRun(100, func() { SplitHost("[::1]:443"); SplitHost("shop.example:8080") }); n != 0 {
		t.Errorf("SplitHost costs %v allocations", n)
	}
}
