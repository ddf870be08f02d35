package store

import (
	"strings"
	"testing"

	"github.com/edgeq/edgeq/internal/config"
)

// hashTag is the part of a key Redis Cluster hashes: between the first '{' and the next '}', when that
// is not empty; otherwise the whole key.
func hashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return key
	}
	return key[open+1 : open+1+end]
}

// FuzzEntityKeys: a queue, product or auction id that passes the id check (the same check every
// visitor-supplied id goes through) can never move a key out of its entity's hash tag — so every key
// one script touches stays in one Cluster slot — and ids that could (braces, separators, control
// characters, over 64 bytes) are refused.
func FuzzEntityKeys(f *testing.F) {
	for _, s := range []string{"drop", "1", "a}b", "{x}", "a:b", "", strings.Repeat("z", 65), "x y", "ü", "a\x00"} {
		f.Add(s, "stock")
	}
	k := Keys{Prefix: "edgeq"}
	f.Fuzz(func(t *testing.T, id, part string) {
		if !config.ID.MatchString(id) {
			if len(id) > 0 && len(id) <= 64 && isIDText(id) {
				t.Fatalf("id %q refused though it is plain", id)
			}
			return
		}
		if len(id) > 64 || strings.ContainsAny(id, "{}:") {
			t.Fatalf("id %q accepted", id)
		}
		for _, c := range []struct{ key, tag string }{
			{k.Queue(id, part), "q:" + id},
			{k.Entity("p", id, part), "p:" + id},
			{k.Entity("a", id, part), "a:" + id},
		} {
			if got := hashTag(c.key); got != c.tag {
				t.Fatalf("key %q hashes on %q, want %q", c.key, got, c.tag)
			}
		}
	})
}

func isIDText(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
