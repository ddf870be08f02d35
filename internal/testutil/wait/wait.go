// Package wait is the one way edgeq's tests wait for something to happen: poll a condition until it
// holds or a generous bound passes, then fail naming what did not happen. Tests never sleep for a
// fixed time and then assert: on a loaded machine that fails, and on an idle one it wastes the time.
package wait

import (
	"testing"
	"time"
)

// Every is how often Until asks the condition again.
const Every = 10 * time.Millisecond

// Until calls cond every Every until it returns true, and fails t (t.Fatalf: call it from the test's
// goroutine) naming what when that has not happened within within.
func Until(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(Every)
	}
}
