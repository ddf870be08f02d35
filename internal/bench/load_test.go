package bench

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunCountsEveryAnswer(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if served.Add(1)%10 == 0 {
			w.WriteHeader(500)
		}
	}))
	defer srv.Close()
	s := Run(NewClient(4), "t", Fixed(Request{Method: "GET", URL: srv.URL}), 200, 4, 200*time.Millisecond)
	if got := int64(len(s.Latencies) + s.Errors); got != served.Load() {
		t.Fatalf("ok %d + errors %d != served %d", len(s.Latencies), s.Errors, served.Load())
	}
	if s.Errors == 0 || len(s.Latencies) == 0 || s.RPS() <= 0 || s.Percentile(0.99) < s.Percentile(0.5) {
		t.Fatalf("sample = %v", s)
	}
}

func TestPercentile(t *testing.T) {
	s := Sample{Latencies: []time.Duration{5, 1, 4, 2, 3}}
	if s.Percentile(0) != 1 || s.Percentile(0.5) != 3 || s.Percentile(1) != 5 {
		t.Fatalf("percentiles of 1..5: %v %v %v", s.Percentile(0), s.Percentile(0.5), s.Percentile(1))
	}
	if (Sample{}).Percentile(0.5) != 0 {
		t.Fatal("empty sample")
	}
}
