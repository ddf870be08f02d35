package store

import "testing"

// A new connection to another master process is a change; a Cluster's masters met on first use are not,
// unless the master says it was promoted or has just started.
func TestMasters_TellAChangeFromAFirstMeeting(t *testing.T) {
	one := masters{seen: map[string]bool{}}
	if changed, _ := one.observe("a", false); changed {
		t.Fatal("the first master is a change")
	}
	if changed, _ := one.observe("a", false); changed {
		t.Fatal("the same master is a change")
	}
	if changed, prev := one.observe("b", false); !changed || prev != "a" {
		t.Fatalf("another master: changed %v, previous %q", changed, prev)
	}
	cluster := masters{cluster: true, seen: map[string]bool{}}
	for _, id := range []string{"m1", "m2", "m3"} {
		if changed, _ := cluster.observe(id, false); changed {
			t.Fatalf("cluster master %s met on first use is a change", id)
		}
	}
	if changed, _ := cluster.observe("m4", true); !changed {
		t.Fatal("a promoted cluster master is not a change")
	}
	if changed, _ := cluster.observe("m4", true); changed {
		t.Fatal("the same promoted master twice")
	}
}
