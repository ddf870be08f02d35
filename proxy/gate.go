package proxy

import (
	"net/http"

	"github.com/edgeq/edgeq/internal/config"
)

// Step is one link of the gate chain. For every route, Wrap returns the handler that runs this step
// and then next, or next itself when the route does not ask for the step. A step that refuses a request
// answers it and does not call next, so the origin is never contacted.
//
// Steps are applied in the order given to the proxy (queue, turnstile, admission), the first outermost.
type Step interface {
	// Requirement names what the step enforces (config.RequireQueue, ...); "" for a step that is not
	// tied to a route setting.
	Requirement() string
	Wrap(route config.Route, next http.Handler) (http.Handler, error)
}

// requirements lists what route asks the gate for.
func requirements(route config.Route) []string {
	var req []string
	if route.Queue != "" {
		req = append(req, config.RequireQueue)
	}
	if route.Turnstile {
		req = append(req, config.RequireTurnstile)
	}
	if route.Admission.Type != "" {
		req = append(req, config.RequireAdmission)
	}
	return req
}
