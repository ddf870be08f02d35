package main

import (
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/cmd/edgeq-bench/internal/load"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/proxy"
	"github.com/edgeq/edgeq/static"
	"github.com/edgeq/edgeq/templates"
)

// originBody is a small page, like a product page fragment or an API answer.
var originBody = []byte(strings.Repeat("edgeq bench body ", 64)) // 1 KiB

func overhead(args []string, w io.Writer) error {
	f, err := parseLoadFlags("overhead", args)
	if err != nil {
		return err
	}
	origin, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(originBody)
	}))
	if err != nil {
		return err
	}
	originURL, _ := url.Parse(origin)

	bare, err := serve(&httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(originURL)
			pr.SetXForwarded()
		},
		Transport: proxy.NewHTTPTransport(config.Default().Origin.Timeout),
	})
	if err != nil {
		return err
	}

	pooled, err := serve(&httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(originURL)
			pr.SetXForwarded()
		},
		Transport:  proxy.NewHTTPTransport(config.Default().Origin.Timeout),
		BufferPool: proxy.NewBufferPool(),
	})
	if err != nil {
		return err
	}

	edge, err := edgeqHandler(originURL)
	if err != nil {
		return err
	}
	edgeURL, err := serve(edge)
	if err != nil {
		return err
	}

	get := func(base, path string) load.Request { return load.Request{Method: "GET", URL: base + path} }
	targets := []target{
		{"direct origin", get(origin, "/page")},
		{"bare ReverseProxy", get(bare, "/page")},
		{"bare + buffer pool", get(pooled, "/page")},
		{"edgeq pass-through", get(edgeURL, "/page")},
		{"edgeq plain route", get(edgeURL, "/plain/page")},
		{"edgeq gate-seam route", get(edgeURL, "/gated/page")},
	}
	samples := measure(f, targets, http.StatusOK)
	printTable(w, f, samples)
	_, _ = fmt.Fprintln(w)
	for _, base := range samples[1:3] {
		for _, s := range samples[3:] {
			_, _ = fmt.Fprintf(w, "%-22s / %-18s %.2fx requests/s\n", s.Name, base.Name, s.RPS()/base.RPS())
		}
	}
	return nil
}

// edgeqHandler builds edgeq's public handler the way the server does: metrics on a registry, pages,
// an info-level JSON access log (discarded, but formatted like in production), two routes.
func edgeqHandler(origin *url.URL) (http.Handler, error) {
	cfg := config.Default()
	assets := static.New(cfg.Server.Prefix + "/static/")
	pages, err := templates.Parse("", template.FuncMap{"static": assets.URL})
	if err != nil {
		return nil, err
	}
	responder := &web.Responder{Pages: pages, Brand: cfg.Pages.Brand, Lang: cfg.Pages.DefaultLanguage, Languages: cfg.Pages.Languages}
	endpoints := http.NewServeMux()
	endpoints.Handle("GET "+cfg.Server.Prefix+"/static/", assets)
	p := proxy.New(proxy.Options{
		Origin:        origin,
		OriginTimeout: cfg.Origin.Timeout,
		Prefix:        cfg.Server.Prefix,
		Endpoints:     web.Routes(endpoints, responder),
		Steps:         []proxy.Step{seamStep{}},
		Responder:     responder,
		Metrics:       metrics.New(prometheus.NewRegistry()),
		// Lines encoded as in production, then dropped: their cost is part of the overhead measured.
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), //nolint:sloglint // see above
	})
	table, err := p.Compile([]config.Route{
		{Name: "plain", Match: "GET /plain/"},
		{Name: "gated", Match: "GET /gated/"},
	})
	if err != nil {
		return nil, err
	}
	p.Use(table)
	return p, nil
}

// seamStep is a gate step that checks nothing: it measures what the gate chain itself costs a route
// (the wrapping, the per-route handler, the outcome bookkeeping), apart from any check's own work.
type seamStep struct{}

func (seamStep) Requirement() string { return "" }

func (seamStep) Wrap(route config.Route, next http.Handler) (http.Handler, error) {
	if route.Name != "gated" {
		return next, nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if web.OutcomeFrom(r.Context()) == nil {
			http.Error(w, "no outcome", http.StatusInternalServerError)
			return
		}
		next.ServeHTTP(w, r)
	}), nil
}

// serve runs h on a loopback port and returns its base URL; it lives as long as the process.
func serve(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go func() { _ = (&http.Server{Handler: h}).Serve(ln) }()
	return "http://" + ln.Addr().String(), nil
}
