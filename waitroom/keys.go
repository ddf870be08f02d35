package waitroom

import "github.com/edgeq/edgeq/internal/store"

// queueKeys returns the KEYS every queue script receives, in lib.lua's order. All share the queue's
// hash tag, so each script touches one Redis Cluster slot.
func queueKeys(k store.Keys, queue string) []string {
	return []string{
		k.Queue(queue, "meta"),
		k.Queue(queue, "counter"),
		k.Queue(queue, "serving"),
		k.Queue(queue, "active"),
		k.Queue(queue, "state"),
		k.Queue(queue, "hb"),
		k.Queue(queue, "tok"),
		k.Queue(queue, "revoked"),
		k.Queue(queue, "pool"),
		k.Queue(queue, "drawn"),
		k.Queue(queue, "inv"),
		k.Queue(queue, "gone"),
	}
}

// checkRecordKey is a bitmap of the bot checks passed to join queue: one per series of solutions
// (a replica's challenges of one second), a bit per solution (the check's Claim), under the queue's
// hash tag so that assign.lua sets it with the place. A bit rather than a key or a member per join:
// an eighth of a byte, and nothing to expire one by one.
func checkRecordKey(k store.Keys, queue, series string) string {
	return k.Queue(queue, "checks:"+series)
}

// queueIndexKey is the set of every queue id, for listing and for replicas discovering queues created
// through the admin API. It is outside the queues' hash tags and never used in a script with them.
func queueIndexKey(k store.Keys) string { return k.Global("queues", "index") }

// joinLimitKey is the limits.join_per_ip_per_minute bucket of one client (client is
// ratelimit.ClientKey of its address), shared by every replica.
func joinLimitKey(k store.Keys, client string) string { return k.Global("rl:"+client, "join") }

// placesKey is the sorted set of the places a client address took in a queue (places.go; address is
// its keyed hash), under the queue's hash tag: assign.lua counts and takes them in one call.
func placesKey(k store.Keys, queue, address string) string { return k.Queue(queue, "ip:"+address) }

// revocationChannel is where finish events are published for every replica.
func revocationChannel(k store.Keys) string { return k.Prefix + ":revocations" }
