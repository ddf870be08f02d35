package config

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/edgeq/edgeq/internal/idmatch"
	"github.com/edgeq/edgeq/internal/vocab"
)

var wildcardInPath = regexp.MustCompile(`\{([^{}]*)\}`)

func (cfg *Config) checkRoutes(c *check) {
	seen := map[string]int{}
	for i, r := range cfg.Routes {
		p := fmt.Sprintf("routes[%d]", i)
		c.id(p+".name", r.Name)
		if strings.HasPrefix(r.Name, "_") {
			c.add(p+".name", "%q: names starting with _ are reserved for edgeq's own metric labels (_passthrough, _edgeq)", r.Name)
		}
		if j, dup := seen[r.Name]; dup {
			c.add(p+".name", "%q is already the name of routes[%d]", r.Name, j)
		}
		seen[r.Name] = i
		wildcards, err := CheckPattern(r.Match)
		if err != nil {
			c.add(p+".match", "%v", err)
		} else if method := PatternMethod(r.Match); strings.Trim(method, letters) != "" {
			c.add(p+".match", "method %q: requests whose method is not made of ASCII letters are refused (400), "+
				"so the route would never match", method)
		} else if path := PatternPath(r.Match); path == cfg.Server.Prefix || strings.HasPrefix(path, cfg.Server.Prefix+"/") {
			c.add(p+".match", "%q is inside server.prefix %s, which edgeq reserves for its own endpoints", r.Match, cfg.Server.Prefix)
		}
		if err == nil {
			checkRouteHost(c, p, r)
		}
		if r.Queue != "" && cfg.QueueByID(r.Queue) == nil {
			c.add(p+".queue", "%q is not the id of any queue", r.Queue)
		}
		c.oneOf(p+".on_store_error", r.OnStoreError, OnStoreErrorClosed, OnStoreErrorOpen)
		if r.MaxInFlight < 0 {
			c.add(p+".max_in_flight", "%d: must be 0 (off) or more", r.MaxInFlight)
		}
		if r.Hold < 0 {
			c.add(p+".hold", "%v: must not be negative", r.Hold)
		}
		if r.HoldPerClient < 0 {
			c.add(p+".hold_per_client", "%d: must be 0 (no bound) or more", r.HoldPerClient)
		}
		for j, o := range r.CompleteOn {
			c.outcome(fmt.Sprintf("%s.complete_on[%d]", p, j), o, r)
		}
		if len(r.CompleteOn) > 0 && r.Queue == "" {
			c.add(p+".complete_on", "completes the visitor's queue session, but the route has no queue")
		}
		if _, err := CompileRefusal(r.Refusal.JSON); err != nil {
			c.add(p+".refusal.json", "%v", err)
		}
		if s := r.Refusal.Status; s != 0 && (s < 200 || s > 299) && (s < 400 || s > 499) {
			c.add(p+".refusal.status", "%d: a 2xx or 4xx status (5xx refusals keep their own), or 0 for each refusal's own", s)
		}
		checkGraphQL(c, p, r)
		cfg.checkAdmission(c, p+".admission", r, wildcards)
	}
}

// checkRouteHost checks the site a route applies to (docs/reference.md "Several sites"): routes[].host
// is a host name, or "*." and one; the host of a match pattern has no port, which ServeMux never
// compares (a request's port is dropped before its host is matched), so such a route would never
// apply; and a route names its host in one place, since two could only disagree.
func checkRouteHost(c *check, p string, r Route) {
	inMatch := PatternHost(r.Match)
	if _, port := vocab.SplitHost(inMatch); port != "" {
		c.add(p+".match", "%q names the host with a port: hosts are matched without their port, so the route would never apply", r.Match)
	}
	if r.Host == "" {
		return
	}
	if name, _ := strings.CutPrefix(r.Host, "*."); !hostName(name) {
		c.add(p+".host", "%q is not a host name or \"*.\" and a host name (no port, scheme or path)", r.Host)
	}
	if inMatch != "" {
		c.add(p+".host", "%q, and match %q names a host too: name the route's host in one place", r.Host, r.Match)
	}
}

// outcome checks one release_on or complete_on entry: answer:PATH naming $field needs a graphql: route.
func (c *check) outcome(path, text string, r Route) {
	o, err := ParseReleaseOutcome(text)
	if err != nil {
		c.add(path, "%v", err)
		return
	}
	if slices.Contains(o.Answer, "$field") && !r.GraphQL.On() {
		c.add(path, "%q: $field stands for the matched field of a graphql: route, and this route has no graphql.fields", text)
	}
}

// checkGraphQL checks a route's graphql: block (docs/reference.md "GraphQL routes").
func checkGraphQL(c *check, p string, r Route) {
	g, gp := r.GraphQL, p+".graphql"
	if !g.On() {
		if len(g.RefuseFields) > 0 || g.Documents != "" {
			c.add(gp+".fields", "required: refuse_fields and documents belong to a graphql: route, which names its guarded fields")
		}
		return
	}
	c.oneOf(gp+".operation", g.Operation, GraphQLMutation, GraphQLQuery)
	if m := PatternMethod(r.Match); m != "" {
		c.add(p+".match", "%q: a graphql: route matches every method on its path (GET ?query=, POST bodies), so it names none: write %q",
			r.Match, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(r.Match), m)))
	}
	seen := map[string]string{}
	for _, list := range []struct {
		key   string
		names []string
	}{{"fields", g.Fields}, {"refuse_fields", g.RefuseFields}} {
		key := list.key
		for i, name := range list.names {
			fp := fmt.Sprintf("%s.%s[%d]", gp, key, i)
			if !GraphQLName.MatchString(name) {
				c.add(fp, "%q is not a GraphQL field name", name)
			} else if other, dup := seen[name]; dup {
				c.add(fp, "%q is also in %s", name, other)
			}
			seen[name] = key
		}
	}
	if g.Documents != "" {
		if body, err := os.ReadFile(g.Documents); err != nil {
			c.add(gp+".documents", "%v", err)
		} else if !json.Valid(body) {
			c.add(gp+".documents", "%s is not JSON: a trusted documents file maps ids to documents ({\"<id>\": \"mutation ...\"}) or is an Apollo persisted query manifest", g.Documents)
		}
	}
}

func (cfg *Config) checkAdmission(c *check, p string, r Route, wildcards []string) {
	a := r.Admission
	source := func(field, value string, required bool) {
		if value == "" {
			if required {
				c.add(p+"."+field, "required for %s admission", a.Type)
			}
			return
		}
		src, err := ParseFieldSource(value)
		if err != nil {
			c.add(p+"."+field, "%v", err)
			return
		}
		if src.Kind == "graphql" && !r.GraphQL.On() {
			c.add(p+"."+field, "%q: graphql: reads an argument of the matched field of a graphql: route, and this route has no graphql.fields", value)
		}
		if src.Kind == "path" && wildcards != nil && !slices.Contains(wildcards, src.Name) {
			c.add(p+"."+field, "%q: the pattern %q has no wildcard {%s}", value, r.Match, src.Name)
		}
	}
	unused := func(field, value string) {
		if value != "" {
			c.add(p+"."+field, "not used by %q admission", a.Type)
		}
	}
	if a.Type == "" {
		for field, value := range a.Fields() {
			if value != "" {
				c.add(p+"."+field, "set, but admission.type is empty (use %s)", strings.Join(admissionTypes(), " or "))
			}
		}
		return
	}
	kind, ok := AdmissionKindOf(a.Type)
	if !ok {
		c.add(p+".type", "%q is not one of %s", a.Type, strings.Join(admissionTypes(), ", "))
		return
	}
	fields := a.Fields()
	for _, name := range []string{kind.Owner, kind.Value} {
		if _, listed := fields[name]; !listed && name != "" {
			fields[name] = "" // a field of the kind's own that the route leaves out
		}
	}
	for field, value := range fields {
		switch field {
		case kind.Owner:
			source(field, value, true)
		case kind.Value:
			source(field, value, kind.ValueRequired)
		default:
			unused(field, value)
		}
	}
	if user, err := ParseUserSource(a.User); err != nil {
		c.add(p+".user", "%v", err)
	} else if user.Field.Kind == "graphql" && !r.GraphQL.On() {
		c.add(p+".user", "%q: graphql: reads an argument of the matched field of a graphql: route, and this route has no graphql.fields", a.User)
	} else if user.FromToken && r.Queue == "" {
		c.add(p+".user", "token identifies users by their queue token, but the route has no queue")
	}
	c.oneOf(p+".unknown_product", a.UnknownOwner, UnknownRefuse, UnknownPass)
	c.oneOf(p+".id_match", a.IDMatch, idmatch.Rules...)
	c.oneOf(p+".orphans", a.Orphans, OrphansHold, OrphansRelease)
	if !kind.Orphans && a.Orphans == OrphansRelease {
		c.add(p+".orphans", "release applies to stock admissions (units held by a replica that died); %s admission never holds any", a.Type)
	}
	for i, o := range a.ReleaseOn {
		c.outcome(fmt.Sprintf("%s.release_on[%d]", p, i), o, r)
	}
}

// CheckPattern reports whether pattern is a valid net/http ServeMux pattern and returns the names of
// its wildcards.
func CheckPattern(pattern string) (wildcards []string, err error) {
	if strings.TrimSpace(pattern) == "" {
		return nil, fmt.Errorf("must not be empty")
	}
	defer func() {
		if r := recover(); r != nil {
			wildcards, err = nil, fmt.Errorf("%q is not a ServeMux pattern ([METHOD ][HOST]/path with {wildcards}): %v", pattern, r)
		}
	}()
	http.NewServeMux().Handle(pattern, http.NotFoundHandler())
	for _, m := range wildcardInPath.FindAllStringSubmatch(PatternPath(pattern), -1) {
		name := strings.TrimSuffix(m[1], "...")
		if name != "$" {
			wildcards = append(wildcards, name)
		}
	}
	return wildcards, nil
}

// PatternMethod returns the method of a ServeMux pattern, "" if it names none: "post /checkout" ->
// "post". Requests match it in any letter case (the proxy upper-cases both).
func PatternMethod(pattern string) string {
	pattern = strings.TrimSpace(pattern)
	if i := strings.IndexAny(pattern, " \t"); i >= 0 {
		return pattern[:i]
	}
	return ""
}

const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// PatternPath returns the path part of a ServeMux pattern: "POST shop.example/checkout/{id}" ->
// "/checkout/{id}".
func PatternPath(pattern string) string {
	rest := strings.TrimSpace(pattern)
	if i := strings.IndexAny(rest, " \t"); i >= 0 {
		rest = strings.TrimLeft(rest[i:], " \t")
	}
	if i := strings.Index(rest, "/"); i >= 0 {
		return rest[i:]
	}
	return rest
}

// PatternHost returns the host of a ServeMux pattern, "" if it names none: "POST shop.example/c" ->
// "shop.example".
func PatternHost(pattern string) string {
	rest := strings.TrimSpace(pattern)
	if i := strings.IndexAny(rest, " \t"); i >= 0 {
		rest = strings.TrimLeft(rest[i:], " \t")
	}
	host, _, _ := strings.Cut(rest, "/")
	return host
}

// admissionTypes are the admission types, in order.
func admissionTypes() []string {
	types := make([]string, len(AdmissionKinds))
	for i, k := range AdmissionKinds {
		types[i] = k.Type
	}
	return types
}
