package waitroom

import (
	"encoding/hex"
	"net/netip"

	"github.com/edgeq/edgeq/internal/vocab"
)

// The places one client address may hold in a queue (queues[].places_per_ip; docs/reference.md
// "Waiting room"). A lottery makes every place a ticket, and without a cookie each join takes another:
// one address would hold as many tickets as the join rate lets it take. The count lives in the store,
// in the join's own script call (assign.lua), so it holds across replicas and inside a grouped call:
// each address has a sorted set of the places it took, under the queue's hash tag, named by a keyed
// hash of the address (no address is stored). A place stops counting once it is no longer waiting
// (served, drawn, given up, expired); assign.lua drops such places from the set as it counts, so
// serving, expiring and finishing cost nothing more.

// placesTTL is how long an address's set outlives the last place it took: as long as the request
// cookie that holds a place. A place still waiting after it no longer counts.
const placesTTL = requestCookieLife

// addressHashes names client addresses by keyed hash (HMAC-SHA-256 over the queue and the address's
// /32 or /64): what the store sees is unlinkable to the address without the key, and differs between
// queues.
type addressHashes struct{ mac vocab.MAC }

func newAddressHashes(key []byte) addressHashes { return addressHashes{mac: vocab.NewMAC(key)} }

// of returns the hash of a client's address in a queue, 32 hex characters: IPv4 addresses (however
// written) by their 32 bits, IPv6 addresses by their /64, as the join rate counts them
// (ratelimit.ClientKey). "" for no address.
func (a addressHashes) of(queue string, client netip.Addr) string {
	if !client.IsValid() {
		return ""
	}
	client = client.Unmap().WithZone("")
	var net []byte
	if client.Is4() {
		b := client.As4()
		net = b[:]
	} else {
		b := client.As16()
		net = b[:8] // the /64: one subscriber's network (RFC 6177)
	}
	sum := a.mac.Sum(func(msg []byte) []byte {
		msg = append(append(append(msg, "edgeq places per address v1\x00"...), queue...), 0)
		return append(msg, net...)
	})
	return hex.EncodeToString(sum[:16])
}

// placesKey returns the key of the places a client address took in a queue (assign.lua), "" when the
// join has no address (it is not counted).
func (r *Room) placesKey(queue string, client netip.Addr) string {
	h := r.addresses.of(queue, client)
	if h == "" {
		return ""
	}
	return placesKey(r.keys, queue, h)
}
