// Package load is edgeq-bench's load harness: a closed-loop HTTP load generator (a fixed number of
// clients, each sending its next request when the previous one is answered) that reports throughput
// and latency percentiles, used by cmd/edgeq-bench to compare targets measured in the same run.
package load

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Request describes one request.
type Request struct {
	Method string
	URL    string
	Header http.Header
	Body   []byte
}

// httpRequest is the request as net/http sends it: its own body reader, the headers given.
func (req Request) httpRequest() (*http.Request, error) {
	var body io.Reader
	if req.Body != nil {
		body = bytes.NewReader(req.Body)
	}
	r, err := http.NewRequest(req.Method, req.URL, body)
	if err != nil {
		return nil, err
	}
	for k, v := range req.Header {
		r.Header[k] = v
	}
	return r, nil
}

// Source gives the request a client sends next; false ends that client's run early (a source of a
// fixed number of requests).
type Source func() (Request, bool)

// Fixed sends the same request forever.
func Fixed(r Request) Source { return func() (Request, bool) { return r, true } }

// Sample is what one or more load runs against one target measured.
type Sample struct {
	Name      string
	Errors    int             // transport errors and unexpected statuses
	Elapsed   time.Duration   // wall time under load
	Latencies []time.Duration // of the successful requests
}

// Add merges another round of the same target.
func (s *Sample) Add(o Sample) {
	s.Errors += o.Errors
	s.Elapsed += o.Elapsed
	s.Latencies = append(s.Latencies, o.Latencies...)
}

// merged is the Sample of a run timed from start: the errors and latencies of each of its clients'.
func merged(name string, start time.Time, clients []Sample) Sample {
	total := Sample{Name: name, Elapsed: time.Since(start)}
	for _, s := range clients {
		total.Errors += s.Errors
		total.Latencies = append(total.Latencies, s.Latencies...)
	}
	return total
}

// eachClient runs client from n goroutines, each with a Sample of its own (its index and that Sample),
// and returns their merged Sample, the run timed from start.
func eachClient(name string, n int, start time.Time, client func(i int, own *Sample)) Sample {
	perClient := make([]Sample, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { client(i, &perClient[i]) })
	}
	wg.Wait()
	return merged(name, start, perClient)
}

// RPS is the rate of successful requests.
func (s Sample) RPS() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(len(s.Latencies)) / s.Elapsed.Seconds()
}

// Percentile returns the q-quantile (0..1) of the successful requests' latencies.
func (s Sample) Percentile(q float64) time.Duration {
	if len(s.Latencies) == 0 {
		return 0
	}
	sorted := slices.Clone(s.Latencies)
	slices.Sort(sorted)
	return sorted[int(float64(len(sorted)-1)*q)]
}

func (s Sample) String() string {
	return fmt.Sprintf("%-26s %9.0f req/s   p50 %9s   p99 %9s   errors %d", s.Name, s.RPS(),
		s.Percentile(0.50).Round(time.Microsecond), s.Percentile(0.99).Round(time.Microsecond), s.Errors)
}

// NewClient returns an HTTP client that keeps a warm connection for every load client.
func NewClient(concurrency int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        concurrency * 2,
		MaxIdleConnsPerHost: concurrency * 2,
		DisableCompression:  true,
	}}
}

// Run drives requests from src with concurrency clients for duration (or until src runs out).
// Responses with another status than want count as errors.
func Run(client *http.Client, name string, src Source, want, concurrency int, duration time.Duration) Sample {
	return RunOK(client, name, src, func(status int) bool { return status == want }, concurrency, duration)
}

// RunOK is Run with a test of the status: answers for which ok is false count as errors.
func RunOK(client *http.Client, name string, src Source, ok func(status int) bool, concurrency int, duration time.Duration) Sample {
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	return eachClient(name, concurrency, time.Now(), func(_ int, own *Sample) {
		own.Latencies = make([]time.Duration, 0, 4096)
		for ctx.Err() == nil {
			req, more := src()
			if !more {
				return
			}
			r, err := req.httpRequest()
			if err != nil {
				own.Errors++
				return
			}
			t0 := time.Now()
			resp, err := client.Do(r)
			if err != nil {
				own.Errors++
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if !ok(resp.StatusCode) {
				own.Errors++
				continue
			}
			own.Latencies = append(own.Latencies, time.Since(t0))
		}
	})
}

// Burst sends every request at once, one client each, released together (n visitors acting in the same
// instant), and measures each answer. Answers for which ok is false count as errors.
func Burst(client *http.Client, name string, reqs []Request, ok func(status int) bool) Sample {
	lat := make([]time.Duration, len(reqs))
	failed := make([]bool, len(reqs))
	gate := make(chan struct{})
	var ready, wg sync.WaitGroup
	ready.Add(len(reqs))
	for i, req := range reqs {
		wg.Go(func() {
			r, err := req.httpRequest()
			ready.Done()
			if err != nil {
				failed[i] = true
				return
			}
			<-gate
			t0 := time.Now()
			resp, err := client.Do(r)
			if err != nil {
				failed[i] = true
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			lat[i], failed[i] = time.Since(t0), !ok(resp.StatusCode)
		})
	}
	ready.Wait()
	start := time.Now()
	close(gate)
	wg.Wait()
	s := Sample{Name: name, Elapsed: time.Since(start)}
	for i, d := range lat {
		if failed[i] {
			s.Errors++
		} else {
			s.Latencies = append(s.Latencies, d)
		}
	}
	return s
}

// Poll is the open-loop load of n users who each send a request every interval (each starting at a
// random moment of the first interval) for duration: what thousands of bidders polling a page every
// few seconds do. A latency runs from the moment the request was due, not from when it was sent, so
// a slow answer that delays a user's next request is not hidden (no coordinated omission).
func Poll(client *http.Client, name string, n int, interval, duration time.Duration, next func(user int) Request, ok func(status int) bool) Sample {
	start := time.Now()
	end := start.Add(duration)
	return eachClient(name, n, start, func(u int, own *Sample) {
		due := start.Add(time.Duration(rand.Int64N(int64(interval))))
		for due.Before(end) {
			time.Sleep(time.Until(due))
			r, err := next(u).httpRequest()
			if err != nil {
				own.Errors++
				return
			}
			resp, err := client.Do(r)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			if err != nil || !ok(resp.StatusCode) {
				own.Errors++
			} else {
				own.Latencies = append(own.Latencies, time.Since(due))
			}
			due = due.Add(interval)
		}
	})
}

// Loop runs op from concurrency goroutines for duration, each calling it again as soon as it
// returns (a closed loop without HTTP: a script called directly on Redis, say), and measures it as a
// Sample. An error from op counts as a failure.
func Loop(name string, concurrency int, duration time.Duration, op func(client int) error) Sample {
	start := time.Now()
	deadline := start.Add(duration)
	total := eachClient(name, concurrency, start, func(i int, own *Sample) {
		for time.Now().Before(deadline) {
			t0 := time.Now()
			if err := op(i); err != nil {
				own.Errors++
				continue
			}
			own.Latencies = append(own.Latencies, time.Since(t0))
		}
	})
	slices.Sort(total.Latencies)
	return total
}
