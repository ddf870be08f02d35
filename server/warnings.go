package server

import (
	"net"
	"slices"
	"strings"

	"github.com/edgeq/edgeq/admission/stock/products"

	"github.com/edgeq/edgeq/botcheck"
	"github.com/edgeq/edgeq/internal/config"
)

// warnings are what a configuration allows but an operator should hear about before a sale: logged
// at start and printed by `edgeq check`, which stays successful. Each is one line naming its key.
func warnings(cfg *config.Config) []string {
	var out []string
	if cfg.Turnstile.SiteKey != "" && botcheck.IsTestingSecret(cfg.Turnstile.SecretKey) {
		out = append(out, "turnstile.secret_key is one of Cloudflare's dummy testing secrets: fine for tests, "+
			"never for a real sale")
	}
	if users := turnstileUsers(cfg); cfg.Challenge.Provider == "turnstile" && len(cfg.Turnstile.Hostnames) == 0 && len(users) > 0 {
		out = append(out, "turnstile.hostnames is empty: a Turnstile response is accepted for whatever host the "+
			"request names in its Host header, so a response solved on another site passes with that site's "+
			"Host; list the shop's host names (used by "+strings.Join(users, ", ")+")")
	}
	if h, ok := cfg.Challenge.Settings["hcaptcha"].(*botcheck.HCaptchaSettings); ok && cfg.Challenge.Provider == "hcaptcha" {
		if h.Secret == botcheck.HCaptchaTestSecret {
			out = append(out, "challenge.hcaptcha.secret is hCaptcha's test secret: every visitor who sends the test "+
				"response passes, on any site; fine for tests, never for a real sale")
		}
		if users := turnstileUsers(cfg); len(h.Hostnames) == 0 && len(users) > 0 {
			out = append(out, "challenge.hcaptcha.hostnames is empty: an hCaptcha response is accepted for whatever "+
				"host the request names in its Host header, so a response solved on another site with the same "+
				"site key passes with that site's Host; list the shop's host names (used by "+strings.Join(users, ", ")+")")
		}
	}
	if len(cfg.Redis.Addrs) > 0 && cfg.Redis.WaitReplicas == 0 {
		out = append(out, "redis.wait_replicas is 0 with "+storeKind(cfg.Redis)+": replication is asynchronous, so a "+
			"failover can sell units twice (the promoted replica may not have the last reservations); set "+
			"redis.wait_replicas to the number of replicas that must hold a reservation before the shop sees it")
	}
	if t := cfg.Tracing; !t.On() && (t.Endpoint != "" || len(t.Headers) > 0) {
		out = append(out, "tracing.endpoint or tracing.headers is set but tracing.exporter is empty: tracing is off; "+
			"set tracing.exporter to otlp_http or otlp_grpc to send traces")
	}
	if a := cfg.Server.TLS.ACME; cfg.Server.TLS.Listen != "" && a.Enabled() && a.Storage == "" && cfg.Redis.Embedded() {
		out = append(out, "server.tls.acme keeps its certificates in the embedded store, which is lost at exit: "+
			"each start orders them again, and Let's Encrypt issues at most 5 a week for the same names; set "+
			"server.tls.acme.storage to a directory, or use Redis")
	}
	for _, q := range cfg.Queues {
		if (q.Shuffle || q.Method == config.MethodRandom) && q.PlacesPerIP == 0 {
			out = append(out, "queues["+q.ID+"].places_per_ip is 0 with "+lotteryOf(q)+": every place is a "+
				"ticket, and one address joining without cookies takes as many as limits.join_per_ip_per_minute "+
				"lets it; set places_per_ip (a few places per address; more where many share one, such as "+
				"offices and carrier NAT)")
		}
		for _, id := range q.SoldOutWith {
			if !slices.ContainsFunc(products.Of(cfg), func(p products.Product) bool { return p.ID == id }) {
				out = append(out, "queues["+q.ID+"].sold_out_with names "+id+", which is not among products: "+
					"unless it is created through the admin API, the queue never sells out")
			}
		}
	}
	for _, r := range cfg.Routes {
		if r.Admission.Type != "" && slices.Contains(r.Admission.ReleaseOn, "timeout") {
			out = append(out, "routes["+r.Name+"].admission.release_on names timeout: a request the shop received whole "+
				"and did not answer in time (it may have sold the unit) gives its units back, so they can sell twice; "+
				"without it such admissions are held as ambiguous for an operator")
		}
		if r.GraphQL.On() && r.Admission.Type != "" && !releasesMissingData(r.Admission.ReleaseOn) {
			out = append(out, "routes["+r.Name+"].admission.release_on gives nothing back when the shop's answer "+
				"has no data for the guarded field (an error inside a 200: a variable of the wrong type, a "+
				"validation or resolver error), so each such request keeps its units up to per_user_limit; add "+
				"\"answer:!data.$field\"")
		}
	}
	return out
}

// notes are what a configuration chooses knowingly but an operator should understand: printed by
// `edgeq check` and logged at start, informational. Each is one line naming its key.
func notes(cfg *config.Config) []string {
	var out []string
	if users := turnstileUsers(cfg); len(users) > 0 {
		out = append(out, "challenge.provider is "+cfg.Challenge.Provider+" (built in: "+strings.Join(botcheck.Names(), ", ")+
			"): the bot check of "+strings.Join(users, ", "))
	}
	if t := cfg.Server.TLS; t.Listen != "" && t.ACME.Enabled() {
		_, plain, _ := net.SplitHostPort(cfg.Server.Listen)
		_, secure, _ := net.SplitHostPort(t.Listen)
		if plain != "80" || secure != "443" {
			out = append(out, "server.tls.acme: the CA checks the names on ports 80 (HTTP-01, server.listen is "+
				cfg.Server.Listen+") and 443 (TLS-ALPN-01, server.tls.listen is "+t.Listen+"); one of the two "+
				"must reach edgeq there, forwarded if not bound directly")
		}
	}
	for _, r := range cfg.Routes {
		if r.Admission.Type == products.Kind && r.Admission.User == config.UserToken {
			out = append(out, "routes["+r.Name+"].admission.user is token: per_user_limit counts one place in line, "+
				"not one person, so a buyer who completes an order and joins the queue again can buy again; "+
				"user: visitor counts one browser, and the shop's signed-in session (cookie:NAME) one account")
		}
	}
	return out
}

// releasesMissingData reports whether release_on gives the units back when the shop's JSON answer has
// no data for the matched field: an answer:! entry on data, or on data.$field and below.
func releasesMissingData(releaseOn []string) bool {
	for _, text := range releaseOn {
		o, err := config.ParseReleaseOutcome(text)
		if err != nil || !o.Absent {
			continue
		}
		if path := o.Answer; len(path) == 1 && path[0] == "data" || len(path) >= 2 && path[0] == "data" && path[1] == "$field" {
			return true
		}
	}
	return false
}

// lotteryOf names what makes a queue's places tickets: its pre-queue's lottery (shuffle), its random
// method, or both.
func lotteryOf(q config.Queue) string {
	switch {
	case q.Shuffle && q.Method == config.MethodRandom:
		return "shuffle and method random"
	case q.Shuffle:
		return "shuffle"
	}
	return "method random"
}

// turnstileUsers names the queues and routes of the file that ask for a bot check (turnstile: true),
// whichever provider makes it.
func turnstileUsers(cfg *config.Config) []string {
	var users []string
	for _, q := range cfg.Queues {
		if q.Turnstile {
			users = append(users, "queue "+q.ID)
		}
	}
	for _, r := range cfg.Routes {
		if r.Turnstile {
			users = append(users, "route "+r.Name)
		}
	}
	return users
}
