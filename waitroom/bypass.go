package waitroom

import (
	"net/netip"

	"github.com/edgeq/edgeq/internal/config"
)

// bypassList is each configured queue's bypass_cidrs, parsed (docs/reference.md "Waiting room"):
// clients in them (their address as found through server.trusted_proxies) are let through the queue's
// gate at once.
type bypassList map[string][]netip.Prefix

func newBypassList(queues []config.Queue) bypassList {
	l := bypassList{}
	for _, q := range queues {
		for _, text := range q.BypassCIDRs {
			if p, err := config.ParseCIDR(text); err == nil { // validated
				l[q.ID] = append(l[q.ID], p)
			}
		}
	}
	return l
}

// bypasses reports whether a client is let through queueID's gate without a token.
func (r *Room) bypasses(queueID string, client netip.Addr) bool {
	l := r.bypass.Load()
	if l == nil || len(*l) == 0 || !client.IsValid() {
		return false
	}
	client = client.Unmap()
	for _, p := range (*l)[queueID] {
		if p.Contains(client) {
			return true
		}
	}
	return false
}
