package waitroom

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/edgeq/edgeq/internal/ratelimit"
	"github.com/edgeq/edgeq/internal/store"
)

func TestKeys_ExactStringsWithHashTags(t *testing.T) {
	k := store.Keys{Prefix: "edgeq"}
	// lib.lua reads KEYS in this order.
	wantQueue := []string{
		"edgeq:{q:drop}:meta", "edgeq:{q:drop}:counter", "edgeq:{q:drop}:serving", "edgeq:{q:drop}:active",
		"edgeq:{q:drop}:state", "edgeq:{q:drop}:hb", "edgeq:{q:drop}:tok", "edgeq:{q:drop}:revoked",
		"edgeq:{q:drop}:pool", "edgeq:{q:drop}:drawn", "edgeq:{q:drop}:inv", "edgeq:{q:drop}:gone",
	}
	if got := queueKeys(k, "drop"); !slices.Equal(got, wantQueue) {
		t.Errorf("queueKeys: got %q, want %q", got, wantQueue)
	}
	cases := []struct{ got, want string }{
		{queueIndexKey(k), "edgeq:{queues}:index"},
		{revocationChannel(k), "edgeq:revocations"},
		{joinLimitKey(k, ratelimit.ClientKey(netip.MustParseAddr("198.51.100.7"))), "edgeq:{rl:198.51.100.7}:join"},
		{joinLimitKey(k, ratelimit.ClientKey(netip.MustParseAddr("::ffff:198.51.100.7"))), "edgeq:{rl:198.51.100.7}:join"},
		{joinLimitKey(k, ratelimit.ClientKey(netip.MustParseAddr("2001:db8:1:2:3:4:5:6"))), "edgeq:{rl:2001:db8:1:2::/64}:join"},
		{placesKey(k, "drop", "0123456789abcdef0123456789abcdef"), "edgeq:{q:drop}:ip:0123456789abcdef0123456789abcdef"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
