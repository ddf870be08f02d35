package store

// Keys builds every Redis key edgeq writes. Each key of a queue, product or auction carries that
// entity's hash tag ({q:<id>}, {p:<id>}, {a:<id>}), so every key one Lua script touches lands in the same
// Redis Cluster slot (docs/reference.md "Store").
type Keys struct {
	Prefix string
}

// Queue returns "<prefix>:{q:<queue>}:<part>".
func (k Keys) Queue(queue, part string) string { return k.Prefix + ":{q:" + queue + "}:" + part }

// Product returns "<prefix>:{p:<product>}:<part>".
func (k Keys) Product(product, part string) string { return k.Prefix + ":{p:" + product + "}:" + part }

// Auction returns "<prefix>:{a:<auction>}:<part>".
func (k Keys) Auction(auction, part string) string { return k.Prefix + ":{a:" + auction + "}:" + part }

// Global returns "<prefix>:{<tag>}:<part>" for indexes that span entities (the admissions index, the
// leaderboard, dead letters); the explicit tag keeps multi-key transactions on them in one slot.
func (k Keys) Global(tag, part string) string { return k.Prefix + ":{" + tag + "}:" + part }

// IDNodes is the set of node numbers leased to replicas for admission and bid ids (ids.LeaseNode).
func (k Keys) IDNodes() string { return k.Global("edgeq", "id_nodes") }
