// Package metrics holds edgeq's Prometheus collectors (docs/reference.md "Metrics in this build").
// Collectors are registered on a registry the caller injects, never on the global default, so tests and
// several servers in one process do not collide. Labels are bounded: route and queue names from the
// configuration and result codes, never anything a visitor controls.
package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/edgeq/edgeq/internal/buildinfo"
	"github.com/edgeq/edgeq/internal/vocab"
)

// Route labels for requests that match no configured route.
const (
	RoutePassThrough = "_passthrough" // proxied ungated
	RouteEdgeq       = "_edgeq"       // edgeq's own endpoints under server.prefix
)

// Origin error kinds (edgeq_origin_errors_total{kind}).
const (
	OriginTimeout     = "timeout"     // no response headers within origin.timeout (504)
	OriginUnavailable = "unavailable" // refused, reset, DNS, bad response (502)
	OriginClientGone  = "client_gone" // the visitor left first (499, not the origin's fault)
	// OriginFenced: an admitted request not sent because the replica's lease lapsed since its
	// admission (503, not the origin's fault).
	OriginFenced = "fenced"
)

// In-flight results (edgeq_route_held_total{result}): what became of a request on a route with
// max_in_flight.
const (
	HeldImmediate  = "immediate"   // a slot was free
	HeldWaited     = "waited"      // it waited in line, then got a slot
	HeldBusy       = "busy"        // hold ran out: 503 BUSY
	HeldGone       = "gone"        // the visitor left while waiting
	HeldStoreError = "store_error" // the store could not be used: the route's on_store_error decided
	// HeldClientBusy: no slot was free and the client had hold_per_client requests in line already:
	// 503 BUSY at once.
	HeldClientBusy = "client_busy"
)

// HeldResults are every in-flight result, for the series to start at 0.
var HeldResults = []string{HeldImmediate, HeldWaited, HeldBusy, HeldGone, HeldStoreError, HeldClientBusy}

// latencyBuckets suit a gateway: most answers take a millisecond, the origin may take seconds.
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// Metrics is the set of collectors.
type Metrics struct {
	HTTPRequests   *prometheus.CounterVec
	HTTPDuration   *prometheus.HistogramVec
	OriginDuration prometheus.Histogram
	OriginErrors   *prometheus.CounterVec
	StoreUp        prometheus.Gauge
	StoreDegraded  prometheus.Gauge
	ConfigReloads  *prometheus.CounterVec
	// StoreBypass counts requests that went to the origin ungated because the store was unavailable
	// and their route says on_store_error: open.
	StoreBypass *prometheus.CounterVec
	// RouteInFlight is this replica's requests holding an in-flight slot (max_in_flight), by route;
	// summed over the replicas it is the route's requests at the origin.
	RouteInFlight *prometheus.GaugeVec
	// RouteHeld counts the requests of max_in_flight routes by route and result (HeldResults).
	RouteHeld *prometheus.CounterVec
	// AdminMisdirected counts the admin listener's 421 MISDIRECTED_REQUEST answers: requests for a Host
	// it does not answer to, such as a DNS rebinding page's.
	AdminMisdirected prometheus.Counter
}

// New creates the collectors and registers them, with the Go runtime and process collectors, on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		HTTPRequests: NewCounterVec("http_requests_total",
			"Requests on the public listener by route (configured name, _passthrough or _edgeq) and status code.", "route", "code"),
		HTTPDuration: NewHistogramVec("http_request_duration_seconds",
			"Time from request to the end of the response on the public listener, by route.", latencyBuckets, "route"),
		OriginDuration: NewHistogram("origin_duration_seconds",
			"Time until the origin's response headers (or its failure).", latencyBuckets),
		OriginErrors: NewCounterVec("origin_errors_total",
			"Proxied requests that got no origin response, by kind: timeout, unavailable, client_gone, fenced.", "kind"),
		StoreUp: NewGauge("store_up", "1 if the latest store PING succeeded, else 0."),
		StoreDegraded: NewGauge("store_degraded",
			"1 while the store counts as unavailable (hysteresis of store_health), else 0."),
		ConfigReloads: NewCounterVec("config_reload_total",
			"Configuration reloads by result: ok or error (refused, old configuration kept).", "result"),
		StoreBypass: NewCounterVec("store_bypass_total",
			"Requests of on_store_error: open routes sent to the origin ungated while the store was unavailable, by route.", "route"),
		RouteInFlight: NewGaugeVec("route_in_flight",
			"Requests of max_in_flight routes this replica has at the origin (holding a slot), by route.", "route"),
		RouteHeld: NewCounterVec("route_held_total",
			"Requests of max_in_flight routes by route and result: immediate, waited, busy, gone, store_error, client_busy.", "route", "result"),
		AdminMisdirected: NewCounter("admin_misdirected_total",
			"Admin listener requests refused with 421 MISDIRECTED_REQUEST: a Host that is not an address, localhost or one of admin.allowed_hosts."),
	}
	reg.MustRegister(m.HTTPRequests, m.HTTPDuration, m.OriginDuration, m.OriginErrors,
		m.StoreUp, m.StoreDegraded, m.ConfigReloads, m.StoreBypass, m.RouteInFlight, m.RouteHeld, m.AdminMisdirected,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Known label values start at zero so dashboards and alerts see the series before the first event.
	for _, kind := range []string{OriginTimeout, OriginUnavailable, OriginClientGone, OriginFenced} {
		m.OriginErrors.WithLabelValues(kind)
	}
	for _, result := range []string{"ok", "error"} {
		m.ConfigReloads.WithLabelValues(result)
	}
	m.StoreUp.Set(1)
	return m
}

// ObserveStore records a store health result; it fits store.NewHealth's observe argument.
func (m *Metrics) ObserveStore(up, degraded bool) {
	m.StoreUp.Set(boolFloat(up))
	m.StoreDegraded.Set(boolFloat(degraded))
}

// NewBuildInfo returns edgeq_build_info{version,revision,goversion}: always 1, its labels say which
// build this replica runs (the same description as `edgeq version`), so a dashboard can show the
// versions in service during a rolling update and an expression can join on it.
func NewBuildInfo(info buildinfo.Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: vocab.Namespace, Name: "build_info",
		Help:        "Always 1; the labels say which build this replica runs: version, revision (the commit) and goversion.",
		ConstLabels: prometheus.Labels{"version": info.Version, "revision": info.Revision, "goversion": info.GoVersion},
	})
	g.Set(1)
	return g
}

// Observe records v in o, with the trace id as an exemplar when there is one (a sampled trace: the
// request's web.Request.TraceID), so a dashboard can go from a slow bucket to a trace of it.
func Observe(o prometheus.Observer, v float64, traceID string) {
	if traceID != "" {
		if e, ok := o.(prometheus.ExemplarObserver); ok {
			e.ObserveWithExemplar(v, prometheus.Labels{"trace_id": traceID})
			return
		}
	}
	o.Observe(v)
}

// StatusLabel renders a status code as a label value.
func StatusLabel(code int) string { return strconv.Itoa(code) }

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
