package pow

import (
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// The page's solver (static/pow-worker.js, run by Node here) finds the same first nonce as Solve for
// challenges of several difficulties, and what it finds passes Verify: the two implement one hash.
func TestWorker_FindsWhatGoFinds(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if storetest.InCI() {
			t.Fatal("this test needs node (apt-get install nodejs); .ci/run installs it")
		}
		t.Skip("node is not installed; skipped outside CI")
	}
	c := New(testKey, nil)
	var challenges []Challenge
	for _, d := range []int{0, 1, 8, 12, 16} {
		challenges = append(challenges, c.Issue("q:drop", "v", d, time.Minute))
	}
	input, _ := json.Marshal(challenges)
	script := `const {solve} = require(process.argv[1]);
const out = JSON.parse(process.argv[2]).map((c) => solve(c.Value, c.Difficulty, 0, 1));
console.log(JSON.stringify(out));`
	out, err := exec.Command(node, "-e", script, "../../static/pow-worker.js", string(input)).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var nonces []string
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(out))), &nonces); err != nil || len(nonces) != len(challenges) {
		t.Fatalf("node printed %q (%v)", out, err)
	}
	for i, ch := range challenges {
		want, _ := Solve(context.Background(), ch.Value, ch.Difficulty)
		if nonces[i] != strconv.FormatUint(want, 10) {
			t.Errorf("difficulty %d: the worker found %s, Go %d", ch.Difficulty, nonces[i], want)
		}
		if got, err := c.Verify(context.Background(), ch.Value, nonces[i], "q:drop", "v"); got != ResultSuccess || err != nil {
			t.Errorf("difficulty %d: the worker's nonce: %s %v", ch.Difficulty, got, err)
		}
	}
}
