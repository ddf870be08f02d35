package accesslog

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// viaSlog is what slog's own handler writes for l.
func viaSlog(t testing.TB, format string, l *Line) string {
	t.Helper()
	var buf bytes.Buffer
	var h slog.Handler = slog.NewJSONHandler(&buf, nil)
	if format == "text" {
		h = slog.NewTextHandler(&buf, nil)
	}
	if err := h.Handle(context.Background(), l.Record()); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func sample() Line {
	return Line{
		Time:          time.Date(2026, 11, 25, 23, 22, 20, 123456789, time.UTC),
		CorrelationID: "8f14e45fceea167a5a36dedd4bea2543",
		Method:        "GET",
		Path:          "/products/42",
		Route:         "gated",
		Status:        200,
		Bytes:         1024,
		DurationMS:    0.351,
		ClientIP:      netip.MustParseAddr("203.0.113.7"),
	}
}

func TestWrite_APlainLineIsWrittenAsSlogWritesIt(t *testing.T) {
	zone := time.FixedZone("CET", 3600)
	for _, format := range []string{"json", "text"} {
		for _, change := range []func(*Line){
			func(*Line) {},
			func(l *Line) { l.DurationMS = 0 },
			func(l *Line) { l.DurationMS = 1234567.891 }, // text: exponent form
			func(l *Line) { l.DurationMS = 0.001 },
			func(l *Line) { l.Time = l.Time.In(zone).Truncate(time.Second) },
			func(l *Line) { l.Time = time.Date(2026, 1, 2, 3, 4, 5, 999999999, time.UTC) }, // text truncates, never rounds
			func(l *Line) { l.ClientIP = netip.MustParseAddr("2001:db8::1") },
			func(l *Line) { l.Status, l.Bytes = 499, 0 },
			func(l *Line) { l.Path = "/_edgeq/status/drop/{request_id}" },
			func(l *Line) { l.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736" }, // a sampled trace
		} {
			l := sample()
			change(&l)
			var buf bytes.Buffer
			if !NewHandler(&buf, format, slog.LevelInfo).Write(&l) {
				t.Fatalf("%s: a plain line was declined: %+v", format, l)
			}
			if got, want := buf.String(), viaSlog(t, format, &l); got != want {
				t.Errorf("%s:\n got %q\nwant %q", format, got, want)
			}
		}
	}
}

func TestWrite_DeclinesWhatNeedsQuotingAndLogWritesItThroughSlog(t *testing.T) {
	for name, change := range map[string]func(*Line){
		"space":            func(l *Line) { l.Path = "/a b" },
		"quote":            func(l *Line) { l.Path = `/a"b` },
		"backslash":        func(l *Line) { l.Path = `/a\b` },
		"equals":           func(l *Line) { l.Path = "/a=b" },
		"control":          func(l *Line) { l.Method = "GE\x01T" },
		"newline":          func(l *Line) { l.Path = "/a\nfake line" },
		"not ASCII":        func(l *Line) { l.Path = "/cafés" },
		"invalid UTF-8":    func(l *Line) { l.Path = "/\xff" },
		"line separator":   func(l *Line) { l.Path = "/\u2028" },
		"empty":            func(l *Line) { l.Route = "" },
		"no client":        func(l *Line) { l.ClientIP = netip.Addr{} },
		"zone":             func(l *Line) { l.ClientIP = netip.MustParseAddr("fe80::1%eth 0") },
		"no time":          func(l *Line) { l.Time = time.Time{} },
		"negative":         func(l *Line) { l.DurationMS = -1 },
		"tiny":             func(l *Line) { l.DurationMS = 1e-9 },
		"huge":             func(l *Line) { l.DurationMS = 1e22 },
		"year beyond 9999": func(l *Line) { l.Time = time.Date(12026, 1, 1, 0, 0, 0, 0, time.UTC) },
	} {
		for _, format := range []string{"json", "text"} {
			l := sample()
			change(&l)
			var buf bytes.Buffer
			h := NewHandler(&buf, format, slog.LevelInfo)
			if h.Write(&l) {
				t.Errorf("%s, %s: written: %q", name, format, buf.String())
				continue
			}
			if buf.Len() != 0 {
				t.Errorf("%s, %s: declined but wrote %q", name, format, buf.String())
			}
			Log(context.Background(), slog.New(h), &l)
			if got, want := buf.String(), viaSlog(t, format, &l); got != want {
				t.Errorf("%s, %s: Log wrote\n%q\nslog writes\n%q", name, format, got, want)
			}
		}
	}
}

func TestLog_AnyOtherHandlerGetsTheRecord(t *testing.T) {
	var buf bytes.Buffer
	l := sample()
	Log(context.Background(), slog.New(slog.NewJSONHandler(&buf, nil)), &l)
	if got, want := buf.String(), viaSlog(t, "json", &l); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestHandler_OtherRecordsAreSlogs(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		var got, want bytes.Buffer
		when := time.Date(2026, 11, 25, 1, 2, 3, 4, time.UTC)
		for _, h := range []slog.Handler{NewHandler(&got, format, slog.LevelWarn), map[bool]slog.Handler{
			true:  slog.NewJSONHandler(&want, &slog.HandlerOptions{Level: slog.LevelWarn}),
			false: slog.NewTextHandler(&want, &slog.HandlerOptions{Level: slog.LevelWarn}),
		}[format == "json"]} {
			if h.Enabled(context.Background(), slog.LevelInfo) {
				t.Fatalf("%s: info enabled at level warn", format)
			}
			r := slog.NewRecord(when, slog.LevelWarn, "origin slow", 0)
			r.AddAttrs(slog.String("route", "checkout"), slog.Int("n", 3))
			h.WithAttrs([]slog.Attr{slog.String("part", "proxy")}).Handle(context.Background(), r)
		}
		if got.String() != want.String() || got.Len() == 0 {
			t.Errorf("%s: got %q, want %q", format, got.String(), want.String())
		}
	}
}

// Lines written concurrently through Write and through slog never interleave.
func TestHandler_ConcurrentLinesStayWhole(t *testing.T) {
	var buf bytes.Buffer
	h := NewHandler(&buf, "json", slog.LevelInfo)
	logger := slog.New(h)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				l := sample()
				l.Status = 200 + g
				if i%2 == 0 {
					Log(context.Background(), logger, &l)
				} else {
					logger.Info("other", "g", g, "i", i)
				}
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 8*200 {
		t.Fatalf("%d lines, want %d", len(lines), 8*200)
	}
	for _, line := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
	}
}

// FuzzSameAsSlog holds Write to slog's output byte for byte, in both formats; Log writes slog's
// output for every line.
func FuzzSameAsSlog(f *testing.F) {
	l := sample()
	f.Add(l.CorrelationID, l.Method, l.Path, l.Route, l.Status, l.Bytes, int64(351), l.Time.UnixNano(), "203.0.113.7", false)
	f.Add("x", "POST", "/a b", "checkout", 409, int64(0), int64(0), int64(0), "::1", true)
	f.Add("id", "GET", "/é", "r", 200, int64(-5), int64(999999999999), int64(-1), "fe80::1%en0", false)
	f.Fuzz(func(t *testing.T, id, method, path, route string, status int, n, micros, nanos int64, ip string, text bool) {
		addr, _ := netip.ParseAddr(ip)
		l := Line{
			Time: time.Unix(0, nanos).UTC(), CorrelationID: id, Method: method, Path: path, Route: route,
			Status: status, Bytes: n, DurationMS: float64(micros) / 1000, ClientIP: addr,
		}
		if n%2 == 0 {
			l.TraceID = id // a traced request's line ends with its trace id
		}
		format := map[bool]string{true: "text", false: "json"}[text]
		want := viaSlog(t, format, &l)
		var buf bytes.Buffer
		h := NewHandler(&buf, format, slog.LevelInfo)
		if h.Write(&l) {
			if buf.String() != want {
				t.Fatalf("%s:\n got %q\nwant %q", format, buf.String(), want)
			}
			return
		}
		if buf.Len() != 0 {
			t.Fatalf("declined but wrote %q", buf.String())
		}
		Log(context.Background(), slog.New(h), &l)
		if buf.String() != want {
			t.Fatalf("%s via Log:\n got %q\nwant %q", format, buf.String(), want)
		}
	})
}

func BenchmarkAccessLine(b *testing.B) {
	l := sample()
	for _, format := range []string{"json", "text"} {
		b.Run(format+"/slog", func(b *testing.B) {
			logger := slog.New(map[string]slog.Handler{
				"json": slog.NewJSONHandler(discard{}, nil), "text": slog.NewTextHandler(discard{}, nil),
			}[format])
			b.ReportAllocs()
			for b.Loop() {
				// What the proxy did before package accesslog.
				//nolint:sloglint // attributes, as it logged them then
				logger.LogAttrs(context.Background(), slog.LevelInfo, Message,
					slog.String("correlation_id", l.CorrelationID), slog.String("method", l.Method),
					slog.String("path", l.Path), slog.String("route", l.Route), slog.Int("status", l.Status),
					slog.Int64("bytes", l.Bytes), slog.Float64("duration_ms", l.DurationMS),
					slog.String("client_ip", l.ClientIP.String()))
			}
		})
		b.Run(format+"/accesslog", func(b *testing.B) {
			logger := slog.New(NewHandler(discard{}, format, slog.LevelInfo))
			b.ReportAllocs()
			for b.Loop() {
				Log(context.Background(), logger, &l)
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
