package store

// Keys builds every Redis key edgeq writes. Each key of a queue or of an admission kind's owner carries
// that entity's hash tag ({q:<id>}; stock's products {p:<id>}, bid's auctions {a:<id>}), so every key
// one Lua script touches lands in the same Redis Cluster slot (docs/reference.md "Store").
type Keys struct {
	Prefix string
}

// Queue returns "<prefix>:{q:<queue>}:<part>".
func (k Keys) Queue(queue, part string) string { return k.Entity("q", queue, part) }

// Entity returns "<prefix>:{<tag>:<id>}:<part>": a key of one entity under its hash tag, tag the
// letter of its sort (a kind's: stock's "p", bid's "a").
func (k Keys) Entity(tag, id, part string) string {
	return k.Prefix + ":{" + tag + ":" + id + "}:" + part
}

// Global returns "<prefix>:{<tag>}:<part>" for indexes that span entities (the admissions index, the
// leaderboard, dead letters); the explicit tag keeps multi-key transactions on them in one slot.
func (k Keys) Global(tag, part string) string { return k.Prefix + ":{" + tag + "}:" + part }

// IDNodes is the set of node numbers leased to replicas for admission and bid ids (ids.LeaseNode).
func (k Keys) IDNodes() string { return k.Global("edgeq", "id_nodes") }
