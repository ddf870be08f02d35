package inflight

import "github.com/edgeq/edgeq/internal/store"

// routeKeys returns the KEYS every in-flight script receives, in lib.lua's order. All share the
// route's hash tag {f:<route>} (route names are [A-Za-z0-9_-]{1,64}), so each script touches one Redis
// Cluster slot.
func routeKeys(k store.Keys, route string) []string {
	tag := "f:" + route
	return []string{
		k.Global(tag, "holders"),
		k.Global(tag, "waiters"),
		k.Global(tag, "alive"),
		k.Global(tag, "seq"),
		k.Global(tag, "clients"),
	}
}

// grantChannel is where the scripts publish the ticket id of a waiter handed a slot, for every
// replica. A channel is not a key: on a Redis Cluster a publish reaches every node.
func grantChannel(k store.Keys) string { return k.Prefix + ":inflight:granted" }
