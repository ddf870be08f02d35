package config

import (
	"net/url"
	"strings"
)

// Tracing sends OpenTelemetry traces of requests, gates, admissions, the event worker and store calls
// to an OTLP receiver (docs/reference.md "Tracing"); off while Exporter is "".
type Tracing struct {
	// Exporter is how spans leave: "" (tracing off: no span is made, no traceparent header is read
	// or written), TracingOTLPHTTP or TracingOTLPGRPC.
	Exporter string `yaml:"exporter"`
	// Endpoint is the receiver's URL: http:// or https:// (TLS), host and port; for otlp_http a path
	// other than "/" is used as it is, none means /v1/traces.
	Endpoint string `yaml:"endpoint"`
	// SampleRatio is the share of new traces recorded (0 to 1). A request that arrives with a W3C
	// traceparent follows its caller's decision instead (parent-based sampling).
	SampleRatio float64 `yaml:"sample_ratio"`
	// Headers go with every export (an API key, an Authorization header); never logged or printed.
	Headers map[string]string `yaml:"headers" secret:"true"`
}

// Tracing exporters (tracing.exporter).
const (
	TracingOff      = ""
	TracingOTLPHTTP = "otlp_http"
	TracingOTLPGRPC = "otlp_grpc"
)

// DefaultSampleRatio records one new trace in a hundred.
const DefaultSampleRatio = 0.01

// On reports whether traces are made and exported.
func (t Tracing) On() bool { return t.Exporter != TracingOff }

// checkTracing checks tracing. A header's value is a secret: a problem names the header, never the
// value.
func (cfg *Config) checkTracing(c *check) {
	t := cfg.Tracing
	c.oneOf("tracing.exporter", t.Exporter, TracingOff, TracingOTLPHTTP, TracingOTLPGRPC)
	if r := t.SampleRatio; !(r >= 0 && r <= 1) {
		c.add("tracing.sample_ratio", "%v must be between 0 and 1", r)
	}
	for name, value := range t.Headers {
		path := "tracing.headers." + name
		if !validHeaderName(name) {
			c.add(path, "%q is not a header name (letters, digits and !#$%%&'*+-.^_`|~)", name)
		}
		if strings.ContainsFunc(value, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
			c.add(path, "the value holds a control character (a line break?)")
		}
	}
	if !t.On() {
		return
	}
	if t.Endpoint == "" {
		c.add("tracing.endpoint", "required when tracing.exporter is set (such as http://otel-collector:4318)")
		return
	}
	u, err := url.Parse(t.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" {
		// Not quoted: a URL that does not parse may hold a credential.
		c.add("tracing.endpoint", "must be an http:// or https:// URL with a host, without credentials or a query "+
			"(credentials go in tracing.headers)")
		return
	}
	if t.Exporter == TracingOTLPGRPC && u.Path != "" && u.Path != "/" {
		c.add("tracing.endpoint", "%q: an otlp_grpc endpoint is a host and port, without a path", t.Endpoint)
	}
}

// validHeaderName: an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}
