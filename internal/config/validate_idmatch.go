package config

import (
	"fmt"

	"github.com/edgeq/edgeq/internal/idmatch"
)

// checkIDMatch refuses two products (or two auctions) of the file that a route's admission.id_match
// makes one id (docs/reference.md "Other spellings of a guarded id"): the shop would sell both as one,
// while edgeq kept two stocks. Products and auctions are global, so the rule of every stock (bid) route
// applies to all of them; each pair is reported once, under the first route whose rule joins it. Exact
// duplicates are checkEach's.
func (cfg *Config) checkIDMatch(c *check) {
	for _, list := range []struct {
		name, typ string
		ids       []string
	}{
		{"products", AdmissionStock, ids(cfg.Products, func(p Product) string { return p.ID })},
		{"auctions", AdmissionBid, ids(cfg.Auctions, func(a Auction) string { return a.ID })},
	} {
		reported := map[[2]int]bool{}
		for ri, r := range cfg.Routes {
			rule, err := idmatch.Parse(r.Admission.IDMatch)
			if r.Admission.Type != list.typ || err != nil || rule == idmatch.Exact {
				continue
			}
			first := map[string]int{} // form -> index of the first id with it
			for i, id := range list.ids {
				form := rule.Form(id)
				j, seen := first[form]
				if !seen {
					first[form] = i
					continue
				}
				if id == list.ids[j] || reported[[2]int{j, i}] {
					continue
				}
				reported[[2]int{j, i}] = true
				c.add(fmt.Sprintf("%s[%d].id", list.name, i), "%q and %s[%d] (%q) are one id to the shop under "+
					"routes[%d].admission.id_match %s: list it once", id, list.name, j, list.ids[j], ri, rule)
			}
		}
	}
}

func ids[T any](items []T, id func(T) string) []string {
	out := make([]string, len(items))
	for i, item := range items {
		out[i] = id(item)
	}
	return out
}
