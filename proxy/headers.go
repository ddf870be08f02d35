package proxy

import (
	"net/http"
	"net/netip"
	"strings"

	"github.com/edgeq/edgeq/internal/web"
)

// CorrelationHeader carries the id that ties a request's log lines on edgeq and the origin together.
const CorrelationHeader = web.CorrelationHeader

// edgeqHeaderPrefix starts the headers edgeq sends the origin; a client must never be able to send one.
const edgeqHeaderPrefix = "Edgeq-"

// edgeqCookiePrefix starts edgeq's own cookies, which the origin never sees.
const edgeqCookiePrefix = "edgeq_"

// stripEdgeqHeaders removes every Edgeq-* header a client sent: only edgeq may tell the origin about
// queues, requests and admissions.
func stripEdgeqHeaders(h http.Header) {
	for name := range h {
		// Header keys are canonical when they come from net/http's parser; compare case-insensitively
		// anyway so a handler that built a header map by hand cannot slip one through.
		if len(name) >= len(edgeqHeaderPrefix) && strings.EqualFold(name[:len(edgeqHeaderPrefix)], edgeqHeaderPrefix) {
			delete(h, name)
		}
	}
}

// stripEdgeqCookies removes edgeq's cookies (edgeq_*) from the Cookie headers of a request bound for the
// origin, leaving every other cookie exactly as the client sent it.
func stripEdgeqCookies(h http.Header) {
	values := h["Cookie"]
	if len(values) == 0 {
		return
	}
	kept := values[:0:0]
	for _, line := range values {
		var parts []string
		changed := false
		for part := range strings.SplitSeq(line, ";") {
			name, _, _ := strings.Cut(strings.TrimSpace(part), "=")
			if strings.HasPrefix(name, edgeqCookiePrefix) {
				changed = true
				continue
			}
			parts = append(parts, part)
		}
		if !changed {
			kept = append(kept, line)
			continue
		}
		// Trim only what HTTP calls whitespace: trimming more (a form feed, say) could turn a cookie the
		// origin would have ignored into one it reads.
		if joined := strings.Trim(strings.Join(parts, ";"), " \t"); joined != "" {
			kept = append(kept, joined)
		}
	}
	if len(kept) == 0 {
		delete(h, "Cookie")
		return
	}
	h["Cookie"] = kept
}

// trustedSet is the parsed server.trusted_proxies.
type trustedSet []netip.Prefix

func (t trustedSet) contains(a netip.Addr) bool {
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddress returns the visitor's IP: the TCP peer, unless the peer is a trusted proxy, in which case
// X-Forwarded-For is walked from the right past trusted proxies to the first address that is not one.
// An unparsable entry stops the walk: everything left of it is client-controlled. peerTrusted reports
// whether the peer's forwarding headers are believed at all.
func (t trustedSet) clientAddress(remoteAddr string, forwardedFor []string) (client netip.Addr, peerTrusted bool) {
	peer := parsePeer(remoteAddr)
	if !peer.IsValid() || !t.contains(peer) {
		return peer, false
	}
	client = peer
	for i := len(forwardedFor) - 1; i >= 0; i-- {
		entries := strings.Split(forwardedFor[i], ",")
		for j := len(entries) - 1; j >= 0; j-- {
			a, err := netip.ParseAddr(strings.Trim(strings.TrimSpace(entries[j]), "[]"))
			if err != nil {
				return client, true
			}
			client = a.Unmap()
			if !t.contains(client) {
				return client, true
			}
		}
	}
	return client, true
}

func parsePeer(remoteAddr string) netip.Addr {
	if ap, err := netip.ParseAddrPort(remoteAddr); err == nil {
		return ap.Addr().Unmap()
	}
	a, _ := netip.ParseAddr(remoteAddr)
	return a.Unmap()
}

// isHTTPS reports whether the visitor's connection is HTTPS: a TLS connection to edgeq, or a trusted
// proxy saying so in X-Forwarded-Proto (its last value: the one the nearest proxy wrote).
func isHTTPS(r *http.Request, peerTrusted bool) bool {
	if r.TLS != nil {
		return true
	}
	if !peerTrusted {
		return false
	}
	values := r.Header.Values("X-Forwarded-Proto")
	if len(values) == 0 {
		return false
	}
	parts := strings.Split(values[len(values)-1], ",")
	return strings.EqualFold(strings.TrimSpace(parts[len(parts)-1]), "https")
}
