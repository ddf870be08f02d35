//go:build !nofence

package admission

// fenceOff: the fence is on (docs/reference.md "Failover"). A build with the nofence tag turns it off,
// for the chaos run's test that it catches a replica without it.
const fenceOff = false
