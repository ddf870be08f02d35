package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func loadText(t *testing.T, text string) (*Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edgeq.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return Load(path)
}

// Tracing is off unless an exporter is named, and records one new trace in a hundred once it is.
func TestTracing_IsOffByDefaultWithARatioOfOnePercent(t *testing.T) {
	cfg := Default()
	if cfg.Tracing.On() || cfg.Tracing.SampleRatio != 0.01 || cfg.Tracing.Headers == nil || len(cfg.Tracing.Headers) != 0 {
		t.Fatalf("default tracing: %+v", cfg.Tracing)
	}
	if keys := RestartKeys(Default(), &Config{Tracing: Tracing{Exporter: TracingOTLPHTTP}}); !strings.Contains(strings.Join(keys, ","), "tracing.exporter") {
		t.Fatalf("tracing.exporter must need a restart: %v", keys)
	}
}

// Headers come from the file as a mapping, and from EDGEQ_TRACING_HEADERS as name=value pairs or a
// YAML mapping; the sample ratio from EDGEQ_TRACING_SAMPLE_RATIO as text.
func TestTracing_HeadersFromTheFileAndTheEnvironment(t *testing.T) {
	const file = `
origin: {url: "http://127.0.0.1:3000"}
tracing:
  exporter: otlp_grpc
  endpoint: "https://otel-collector:4317"
  sample_ratio: 0.25
  headers: {Authorization: "Bearer abc=", x-tenant: shop}
`
	cfg, err := loadText(t, file)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"authorization": "Bearer abc=", "x-tenant": "shop"}
	if got := cfg.Tracing.Headers; len(got) != 2 || got["authorization"] != want["authorization"] || got["x-tenant"] != "shop" {
		t.Fatalf("headers from the file: %v", got)
	}
	if cfg.Tracing.SampleRatio != 0.25 || cfg.Tracing.Exporter != TracingOTLPGRPC {
		t.Fatalf("tracing: %+v", cfg.Tracing)
	}
	for env, want := range map[string]map[string]string{
		"authorization=Bearer xyz==, X-Tenant = shop": {"authorization": "Bearer xyz==", "x-tenant": "shop"},
		`{authorization: "Bearer a,b"}`:               {"authorization": "Bearer a,b"},
		"":                                            {},
	} {
		t.Setenv("EDGEQ_TRACING_HEADERS", env)
		t.Setenv("EDGEQ_TRACING_SAMPLE_RATIO", "1")
		cfg, err := loadText(t, file)
		if err != nil {
			t.Fatalf("%q: %v", env, err)
		}
		if len(cfg.Tracing.Headers) != len(want) || cfg.Tracing.SampleRatio != 1 {
			t.Fatalf("%q: %v, ratio %v", env, cfg.Tracing.Headers, cfg.Tracing.SampleRatio)
		}
		for k, v := range want {
			if cfg.Tracing.Headers[k] != v {
				t.Errorf("%q: %s = %q, want %q", env, k, cfg.Tracing.Headers[k], v)
			}
		}
	}
	t.Setenv("EDGEQ_TRACING_HEADERS", "no pair here")
	if _, err := loadText(t, file); err == nil || !strings.Contains(err.Error(), "tracing.headers: must be name=value pairs") {
		t.Fatalf("a malformed EDGEQ_TRACING_HEADERS: %v", err)
	}
}

// `edgeq check -print` shows the header names, never their values; a problem with the endpoint never
// repeats a password written into it.
func TestTracing_SecretsStayOutOfPrintsAndProblems(t *testing.T) {
	cfg := Default()
	cfg.Tracing = Tracing{Exporter: TracingOTLPHTTP, Endpoint: "http://c:4318", SampleRatio: 1,
		Headers: map[string]string{"authorization": "Bearer s3cret-value"}}
	var out bytes.Buffer
	if err := Print(cfg, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "s3cret") || !strings.Contains(out.String(), "authorization: \""+Masked+"\"") {
		t.Fatalf("printed:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "sample_ratio: 1.0\n") {
		t.Fatalf("sample_ratio printed as:\n%s", out.String())
	}
	printed, err := loadText(t, strings.ReplaceAll(out.String(), Masked, "x"))
	if err != nil || printed.Tracing.Endpoint != "http://c:4318" {
		t.Fatalf("the printed configuration does not load back: %v", err)
	}
	for endpoint, want := range map[string]string{
		"":                                  "tracing.endpoint: required when tracing.exporter is set",
		"http://edgeq:hunter2@c:4318":       "tracing.endpoint: must be an http:// or https:// URL",
		"otel-collector:4318":               "tracing.endpoint: must be an http:// or https:// URL",
		"http://c:4318/v1/traces?k=hunter2": "tracing.endpoint: must be an http:// or https:// URL",
	} {
		c := Default()
		c.Tracing = Tracing{Exporter: TracingOTLPHTTP, Endpoint: endpoint, SampleRatio: 0.5}
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: %v, want %s", endpoint, err, want)
		}
	}
	c := Default()
	c.Tracing = Tracing{Exporter: TracingOTLPGRPC, Endpoint: "http://c:4317/v1/traces", SampleRatio: 0.5}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "an otlp_grpc endpoint is a host and port") {
		t.Errorf("a gRPC endpoint with a path: %v", err)
	}
	c.Tracing.Endpoint = "http://c:4317"
	if err := c.Validate(); err != nil {
		t.Errorf("a gRPC endpoint: %v", err)
	}
}
