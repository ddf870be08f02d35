// Package admissiontest builds edgeq's admission service as server does, with the settings of the
// tests, for the tests of an admission kind's package: the service edgetest's stack runs
// (edgetest.Options.Build). Admission's own tests build theirs in their package, since an import of
// this one from there would be a cycle.
package admissiontest

import (
	"time"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/ids"
	"github.com/edgeq/edgeq/internal/testutil/edgetest"
)

// Build returns what builds one replica's service: a claim TTL of a minute, short backoffs and claim
// idle time, the identity key "identity". set, when not nil, changes the options before the service is
// built.
func Build(set func(*admission.Options)) func(edgetest.Deps) edgetest.Service {
	return func(d edgetest.Deps) edgetest.Service {
		o := admission.Options{
			Store: d.Store, IDs: ids.New(d.Node), IdentityKey: []byte("identity"), MaxBodyBytes: 4096, ClaimTTL: time.Minute,
			Prefix: "/_edgeq", Responder: d.Responder, Logger: d.Logger, Registry: d.Registry,
			Backoff:   []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond},
			ClaimIdle: 300 * time.Millisecond,
		}
		if set != nil {
			set(&o)
		}
		return admission.New(o)
	}
}
