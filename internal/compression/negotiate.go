// Package compression compresses edgeq's own answers — pages, scripts, styles and JSON — for clients
// that accept gzip (docs/reference.md "Compression"). It is mounted on edgeq's own endpoints and the
// admin listener, never in front of the shop: the shop's answers pass as the shop sent them.
//
// gzip only: every browser and HTTP client accepts it, and brotli would shave about 15% more off
// edgeq's scripts and styles (fetched once per visitor: they are cached as immutable) at the price of
// 2.7 MB more binary (andybalholm/brotli's tables) and an encoder two to three times slower than
// compress/gzip at the same ratio on pages made per request.
package compression

import (
	"strconv"
	"strings"
)

// AcceptsGzip reports whether a request's Accept-Encoding values accept a gzip body (RFC 9110 section
// 12.5.3): "gzip" or "x-gzip", else "*", with a weight above 0, unless "identity" is named with a
// higher one. Without the header, or with only other codings, the answer is sent as it is. Coding names
// are compared in any case; a weight that does not parse refuses its coding rather than be guessed at.
// No allocation.
func AcceptsGzip(values []string) bool {
	gzipQ, starQ, identityQ := -1.0, -1.0, -1.0
	for _, value := range values {
		for value != "" {
			element := value
			if i := strings.IndexByte(value, ','); i >= 0 {
				element, value = value[:i], value[i+1:]
			} else {
				value = ""
			}
			coding, q := element, 1.0
			if i := strings.IndexByte(element, ';'); i >= 0 {
				coding, q = element[:i], weight(element[i+1:])
			}
			// Lengths first: this runs on every request, and most codings named are none of these.
			switch coding = strings.TrimSpace(coding); len(coding) {
			case len("gzip"):
				if strings.EqualFold(coding, "gzip") {
					gzipQ = max(gzipQ, q)
				}
			case len("x-gzip"):
				if strings.EqualFold(coding, "x-gzip") {
					gzipQ = max(gzipQ, q)
				}
			case len("*"):
				if coding == "*" {
					starQ = max(starQ, q)
				}
			case len("identity"):
				if strings.EqualFold(coding, "identity") {
					identityQ = max(identityQ, q)
				}
			}
		}
	}
	if gzipQ < 0 {
		gzipQ = starQ // "*" stands for every coding not named
	}
	return gzipQ > 0 && gzipQ >= identityQ
}

// weight is the q parameter among an element's parameters ("q=0.5"), 1 when there is none, 0 when it
// does not parse or is out of range.
func weight(params string) float64 {
	for params != "" {
		var param string
		param, params, _ = strings.Cut(params, ";")
		name, value, _ := strings.Cut(param, "=")
		if !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue
		}
		q, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil || q < 0 || q > 1 {
			return 0
		}
		return q
	}
	return 1
}

// compressible reports whether a Content-Type is worth compressing: text (but not a stream of
// server-sent events, whose every event must go out as it is written), JSON, JavaScript, XML and SVG.
// An answer without one is left alone: net/http would sniff its type from the first bytes, which
// compressed bytes would hide.
func compressible(contentType string) bool {
	media, _, _ := strings.Cut(contentType, ";")
	media = strings.ToLower(strings.TrimSpace(media))
	switch {
	case media == "text/event-stream":
		return false
	case strings.HasPrefix(media, "text/"):
		return true
	case media == "application/json", media == "application/javascript", media == "application/xml",
		media == "image/svg+xml", strings.HasSuffix(media, "+json"), strings.HasSuffix(media, "+xml"):
		return true
	}
	return false
}
