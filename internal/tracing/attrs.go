package tracing

import "go.opentelemetry.io/otel/attribute"

// Attributes of edgeq's spans. Values are names from the configuration (routes, queues), ids of
// products and auctions, result codes and HTTP facts; never a user or visitor id, a token, a cookie,
// a request body, an address or a secret.
const (
	Route  = attribute.Key("edgeq.route")  // the route's name (routes[].name, _passthrough, _edgeq)
	Queue  = attribute.Key("edgeq.queue")  // a queue id
	Result = attribute.Key("edgeq.result") // what a step decided: passed, admitted, ok, or a code
	Code   = attribute.Key("edgeq.code")   // the error code edgeq answered with
	Kind   = attribute.Key("edgeq.admission.kind")
	// Entries, Streams and Linked describe an event worker's pass.
	Entries = attribute.Key("edgeq.worker.entries")
	Streams = attribute.Key("edgeq.worker.streams")
	Linked  = attribute.Key("edgeq.worker.linked")
)

// Owner is the attribute of an admission kind's owner id, by the kind's noun: "edgeq.product" for
// stock's products, "edgeq.auction" for bid's auctions.
func Owner(owner string) attribute.Key { return attribute.Key("edgeq." + owner) }
