package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgeq/edgeq/internal/buildinfo"
)

func TestNew_RegistersDocumentedNamesOnTheInjectedRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.HTTPRequests.WithLabelValues("checkout", StatusLabel(200)).Inc()
	m.HTTPDuration.WithLabelValues("checkout").Observe(0.01)
	m.OriginDuration.Observe(0.02)
	m.ObserveStore(false, true)
	m.RouteInFlight.WithLabelValues("checkout").Inc()
	m.RouteHeld.WithLabelValues("checkout", HeldWaited).Inc()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	for _, want := range []string{
		"edgeq_http_requests_total", "edgeq_http_request_duration_seconds", "edgeq_origin_duration_seconds",
		"edgeq_origin_errors_total", "edgeq_store_up", "edgeq_store_degraded", "edgeq_config_reload_total",
		"edgeq_route_in_flight", "edgeq_route_held_total", "go_goroutines",
	} {
		if !names[want] {
			t.Errorf("%s not registered", want)
		}
	}
	if got := testutil.ToFloat64(m.StoreUp); got != 0 {
		t.Errorf("store_up = %v after a failed ping", got)
	}
	if got := testutil.ToFloat64(m.StoreDegraded); got != 1 {
		t.Errorf("store_degraded = %v", got)
	}
	// Two servers in one process (tests, benchmarks) must not collide.
	New(prometheus.NewRegistry())
}

func TestNew_ErrorKindsStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	New(reg)
	const want = `
# HELP edgeq_origin_errors_total Proxied requests that got no origin response, by kind: timeout, unavailable, client_gone, fenced.
# TYPE edgeq_origin_errors_total counter
edgeq_origin_errors_total{kind="client_gone"} 0
edgeq_origin_errors_total{kind="fenced"} 0
edgeq_origin_errors_total{kind="timeout"} 0
edgeq_origin_errors_total{kind="unavailable"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "edgeq_origin_errors_total"); err != nil {
		t.Fatal(err)
	}
}

func TestNewBuildInfo_OneSeriesWhoseLabelsSayTheBuild(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewBuildInfo(buildinfo.Info{Version: "v9.8.7", Revision: "20ece96abcdef", GoVersion: "go1.26.8"}))
	const want = `
# HELP edgeq_build_info Always 1; the labels say which build this replica runs: version, revision (the commit) and goversion.
# TYPE edgeq_build_info gauge
edgeq_build_info{goversion="go1.26.8",revision="20ece96abcdef",version="v9.8.7"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "edgeq_build_info"); err != nil {
		t.Fatal(err)
	}
}
