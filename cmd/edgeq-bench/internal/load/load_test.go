package load

import (
	"io"
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

func TestBurstSendsEveryRequestAtOnce(t *testing.T) {
	var inFlight, most, served atomic.Int64
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		if n == 20 {
			close(release) // all twenty are in the server together
		}
		<-release
		inFlight.Add(-1)
		if served.Add(1) == 1 {
			w.WriteHeader(409)
		}
	}))
	defer srv.Close()
	reqs := make([]Request, 20)
	for i := range reqs {
		reqs[i] = Request{Method: "GET", URL: srv.URL}
	}
	s := Burst(NewClient(20), "t", reqs, func(status int) bool { return status == 200 })
	if most.Load() != 20 || s.Errors != 1 || len(s.Latencies) != 19 || s.Elapsed <= 0 {
		t.Fatalf("most in flight %d, sample %v", most.Load(), s)
	}
}

func TestPollKeepsTheSchedule(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
	}))
	defer srv.Close()
	// 10 users every 100 ms for 500 ms: each sends 5 requests (its first falls in the first interval).
	s := Poll(NewClient(10), "t", 10, 100*time.Millisecond, 500*time.Millisecond,
		func(int) Request { return Request{Method: "GET", URL: srv.URL} }, func(status int) bool { return status == 200 })
	if served.Load() != 50 || len(s.Latencies) != 50 || s.Errors != 0 {
		t.Fatalf("served %d, sample %v", served.Load(), s)
	}
}

// Every send of a Request gets its own body reader, so a request sent again carries its whole body.
func TestRequest_HTTPRequestHasItsOwnBody(t *testing.T) {
	req := Request{Method: "POST", URL: "http://shop.example/checkout/1", Header: http.Header{"Content-Type": {"application/json"}},
		Body: []byte(`{"quantity":1}`)}
	for range 2 {
		r, err := req.httpRequest()
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(r.Body)
		if r.Method != "POST" || r.URL.String() != req.URL || r.Header.Get("Content-Type") != "application/json" || string(body) != `{"quantity":1}` {
			t.Fatalf("%s %s %v %q", r.Method, r.URL, r.Header, body)
		}
	}
	if r, err := (Request{Method: "GET", URL: "http://shop.example/"}).httpRequest(); err != nil || r.Body != nil && r.Body != http.NoBody {
		t.Fatalf("a request without a body: %v, body %v", err, r.Body)
	}
	if _, err := (Request{Method: "GET", URL: "http://[::1"}).httpRequest(); err == nil {
		t.Fatal("a malformed URL was sent")
	}
}

// A run's Sample holds every client's errors and latencies, timed from the run's start.
func TestMerged_AddsEveryClient(t *testing.T) {
	start := time.Now().Add(-time.Second)
	got := merged("x", start, []Sample{
		{Errors: 1, Latencies: []time.Duration{3, 1}},
		{},
		{Errors: 2, Latencies: []time.Duration{2}},
	})
	if got.Name != "x" || got.Errors != 3 || len(got.Latencies) != 3 || got.Elapsed < time.Second {
		t.Fatalf("merged: %+v", got)
	}
}
