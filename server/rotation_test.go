package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeq/edgeq/internal/token"
)

// writeKey writes a new signing key to dir/name and returns its path.
func writeKey(t *testing.T, dir, name string) string {
	t.Helper()
	key, err := token.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pemBytes, err := token.MarshalPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// rotationConfig is a one-place queue gating /products, with the given keys and identity secret.
func rotationConfig(originURL, redisAddr, signing, verify, identity string) string {
	return fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
redis: {addr: %q}
log: {level: warn}
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
tokens: {signing_key_file: %q, verify_key_files: [%s]}
identity: {secret: %q}
queues:
  - {id: drop, capacity: 1, token_ttl: 10m}
routes:
  - {name: products, match: "GET /products/{id}", queue: drop}
`, originURL, redisAddr, signing, verify, identity)
}

// Rotating the signing key as the README says (new key in signing_key_file, old key in
// verify_key_files, the same identity.secret) keeps every place in line and every live token: a
// replica with the new key knows a waiting visitor's position and lets a token of the old key in.
// The controls show what each part does: without the old key in verify_key_files its tokens are
// refused; with a different identity.secret places and tokens are unknown.
func TestKeyRotation_KeepsPlacesAndTokens(t *testing.T) {
	redisSrv := privateRedis(t)
	origin := newOrigin(t)
	dir := t.TempDir()
	oldKey, newKey := writeKey(t, dir, "old.pem"), writeKey(t, dir, "new.pem")
	const secret = "rotation-test-identity-secret"

	before := start(t, rotationConfig(origin.URL, redisSrv.Addr(), oldKey, "", secret))
	servedID, oldToken := joinAndToken(t, before, "drop")
	resp, err := http.PostForm(before.public+"/_edgeq/assign_queue_pos", url.Values{"queue_id": {"drop"}})
	if err != nil {
		t.Fatal(err)
	}
	var waiting struct {
		RequestID string `json:"request_id"`
	}
	json.NewDecoder(resp.Body).Decode(&waiting)
	resp.Body.Close()
	if p := position(t, before, "queue_pos/drop/"+waiting.RequestID); p != 2 {
		t.Fatalf("the waiting visitor is at %d, want 2", p)
	}

	bearer := http.Header{"Authorization": {"Bearer " + oldToken}, "Accept": {"application/json"}}
	after := start(t, rotationConfig(origin.URL, redisSrv.Addr(), newKey, fmt.Sprintf("%q", oldKey), secret))
	if p := position(t, after, "queue_pos/drop/"+waiting.RequestID); p != 2 {
		t.Fatalf("after the rotation the waiting visitor is at %d, want 2", p)
	}
	if a, err := send("GET", after.public+"/products/1", bearer); err != nil || a.status != 200 {
		t.Fatalf("after the rotation a token of the old key is refused: %v %d %s", err, a.status, a.body)
	}
	// The place is served under the new key: releasing the first visitor's token serves position 2,
	// and the new replica issues its token, signed with the new key, which the old replica (it has
	// not been restarted yet) refuses: rolling restarts briefly split replicas, as docs/operations.md says.
	adminForm(t, after, "/api/queue/update_token_status", url.Values{"queue_id": {"drop"}, "request_id": {servedID}, "status": {"1"}})
	var issued struct {
		AccessToken string `json:"access_token"`
	}
	eventually(t, "the waiting visitor is served after the rotation", func() bool {
		resp, err := http.PostForm(after.public+"/_edgeq/generate_token", url.Values{"queue_id": {"drop"}, "request_id": {waiting.RequestID}})
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&issued) == nil && issued.AccessToken != ""
	})
	newBearer := http.Header{"Authorization": {"Bearer " + issued.AccessToken}, "Accept": {"application/json"}}
	if a, _ := send("GET", after.public+"/products/1", newBearer); a.status != 200 {
		t.Fatalf("a token of the new key: %d %s", a.status, a.body)
	}

	// Controls. Without the old key to verify with, its tokens are refused.
	noVerify := start(t, rotationConfig(origin.URL, redisSrv.Addr(), newKey, "", secret))
	if a, _ := send("GET", noVerify.public+"/products/1", newBearer); a.status != 200 {
		t.Fatalf("control: a token of the new key on a replica of the new key: %d %s", a.status, a.body)
	}
	if a, _ := send("GET", noVerify.public+"/products/1", bearer); a.status == 200 {
		t.Fatal("a token of the old key opens the page on a replica that does not list the old key")
	}
	// With another identity secret, request ids (and the tokens that carry them) are unknown.
	otherSecret := start(t, rotationConfig(origin.URL, redisSrv.Addr(), newKey, fmt.Sprintf("%q", oldKey), "another-secret"))
	if a, _ := send("GET", otherSecret.public+"/_edgeq/queue_pos/drop/"+waiting.RequestID, nil); a.status != 404 ||
		!strings.Contains(a.body, "REQUEST_NOT_FOUND") {
		t.Fatalf("a request id under another identity secret: %d %s", a.status, a.body)
	}
	if a, _ := send("GET", otherSecret.public+"/products/1", newBearer); a.status == 200 {
		t.Fatal("a token opens the page on a replica with another identity secret")
	}
}
