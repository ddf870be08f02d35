//go:build nofence

package admission

// fenceOff: this build sends what a paused replica admitted whatever its lease says: for the chaos
// run's test that it catches a replica without the fence, never for a release.
const fenceOff = true
