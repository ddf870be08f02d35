package config

import (
	"fmt"

	"github.com/edgeq/edgeq/internal/idmatch"
)

// checkIDMatch refuses two ids of a section's list (products, auctions) that the admission.id_match of
// a route of admissionType makes one id (docs/reference.md "Other spellings of a guarded id"): the
// shop would sell both as one, while edgeq kept two stocks. The lists are global, so the rule of every
// route of the type applies to all of their ids; each pair is reported once, under the first route
// whose rule joins it. Exact duplicates are checkEach's.
func (cfg *Config) checkIDMatch(c *check, list, admissionType string, ids []string) {
	reported := map[[2]int]bool{}
	for ri, r := range cfg.Routes {
		rule, err := idmatch.Parse(r.Admission.IDMatch)
		if r.Admission.Type != admissionType || err != nil || rule == idmatch.Exact {
			continue
		}
		first := map[string]int{} // form -> index of the first id with it
		for i, id := range ids {
			form := rule.Form(id)
			j, seen := first[form]
			if !seen {
				first[form] = i
				continue
			}
			if id == ids[j] || reported[[2]int{j, i}] {
				continue
			}
			reported[[2]int{j, i}] = true
			c.add(fmt.Sprintf("%s[%d].id", list, i), "%q and %s[%d] (%q) are one id to the shop under "+
				"routes[%d].admission.id_match %s: list it once", id, list, j, ids[j], ri, rule)
		}
	}
}
