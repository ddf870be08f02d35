// Command receiver is a real OTLP receiver for edgeq's tests: the OpenTelemetry Collector's own OTLP
// receiver (gRPC and HTTP), with the spans it takes kept in memory and served back as JSON. It is a
// module of its own, so that the Collector's dependencies never reach edgeq's go.mod; the otlptest
// package builds and runs it.
//
//	receiver -grpc 127.0.0.1:4317 -http 127.0.0.1:4318 -query 127.0.0.1:16686
//
// GET /spans on the query address answers every span received so far; GET /ready answers 200 once
// both OTLP endpoints listen.
package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

// Span is one received span, flattened: attribute values as text, events and links by what tests ask
// about. otlptest reads the JSON back into a copy of Span, Event and Link: this module and edgeq's
// share no package, so that neither module's dependencies reach the other's go.mod.
type Span struct {
	Service    string            `json:"service"`
	TraceID    string            `json:"trace_id"`
	SpanID     string            `json:"span_id"`
	ParentID   string            `json:"parent_id"`
	Name       string            `json:"name"`
	Kind       string            `json:"kind"`
	Status     string            `json:"status"`
	Attributes map[string]string `json:"attributes"`
	Events     []Event           `json:"events"`
	Links      []Link            `json:"links"`
	// Resource holds the resource's attributes (service.name among them).
	Resource map[string]string `json:"resource"`
}

// Event is a span event.
type Event struct {
	Name       string            `json:"name"`
	Attributes map[string]string `json:"attributes"`
}

// Link is a span link.
type Link struct {
	TraceID string `json:"trace_id"`
	SpanID  string `json:"span_id"`
}

type store struct {
	mu    sync.Mutex
	spans []Span
}

func (s *store) consume(_ context.Context, td ptrace.Traces) error {
	var got []Span
	for _, rs := range td.ResourceSpans().All() {
		resource := attrs(rs.Resource().Attributes())
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				span := Span{
					Service: resource["service.name"], Resource: resource,
					TraceID: hexID(sp.TraceID()), SpanID: hexSpan(sp.SpanID()), Name: sp.Name(),
					Kind: sp.Kind().String(), Status: sp.Status().Code().String(),
					Attributes: attrs(sp.Attributes()), Events: []Event{}, Links: []Link{},
				}
				if !sp.ParentSpanID().IsEmpty() {
					span.ParentID = hexSpan(sp.ParentSpanID())
				}
				for _, e := range sp.Events().All() {
					span.Events = append(span.Events, Event{Name: e.Name(), Attributes: attrs(e.Attributes())})
				}
				for _, l := range sp.Links().All() {
					span.Links = append(span.Links, Link{TraceID: hexID(l.TraceID()), SpanID: hexSpan(l.SpanID())})
				}
				got = append(got, span)
			}
		}
	}
	s.mu.Lock()
	s.spans = append(s.spans, got...)
	s.mu.Unlock()
	return nil
}

func hexID(id pcommon.TraceID) string  { return hex.EncodeToString(id[:]) }
func hexSpan(id pcommon.SpanID) string { return hex.EncodeToString(id[:]) }

func attrs(m pcommon.Map) map[string]string {
	out := make(map[string]string, m.Len())
	for k, v := range m.All() {
		out[k] = v.AsString()
	}
	return out
}

func main() {
	grpcAddr := flag.String("grpc", "127.0.0.1:4317", "OTLP/gRPC listen address")
	httpAddr := flag.String("http", "127.0.0.1:4318", "OTLP/HTTP listen address")
	queryAddr := flag.String("query", "127.0.0.1:16686", "listen address of the JSON query API")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	s := &store{}
	factory := otlpreceiver.NewFactory()
	cfg := factory.CreateDefaultConfig().(*otlpreceiver.Config)
	cfg.Protocols.GRPC.GetOrInsertDefault().NetAddr.Endpoint = *grpcAddr
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = *httpAddr
	next, err := consumer.NewTraces(s.consume)
	if err != nil {
		log.Fatal(err)
	}
	r, err := factory.CreateTraces(ctx, receivertest.NewNopSettings(factory.Type()), cfg, next)
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Start(ctx, componenttest.NewNopHost()); err != nil {
		log.Fatalf("starting the OTLP receiver: %v", err)
	}
	defer r.Shutdown(context.Background())

	mux := http.NewServeMux()
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ready") })
	mux.HandleFunc("GET /spans", func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		body, err := json.Marshal(append([]Span{}, s.spans...))
		s.mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	ln, err := net.Listen("tcp", *queryAddr)
	if err != nil {
		log.Fatalf("query listener: %v", err)
	}
	server := &http.Server{Handler: mux}
	go server.Serve(ln)
	log.Printf("receiving OTLP on grpc %s and http %s, spans on http://%s/spans", *grpcAddr, *httpAddr, ln.Addr())
	<-ctx.Done()
	server.Close()
}
