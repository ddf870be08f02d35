package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/inflight"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/web"
)

// requireInFlight names max_in_flight among a route's requirements: a route that sets it on a proxy
// built without a limiter is closed (503 GATE_UNAVAILABLE), not unlimited.
const requireInFlight = "max_in_flight"

// limitInFlight is a route's in-flight stage (max_in_flight, hold; docs/reference.md, "In-flight
// limits"): at most max_in_flight requests of the route at the origin at once, across every replica.
// It is the last link of the chain, right before forwarding, so a request the gates refuse never
// takes a slot. A route without max_in_flight gets next itself: no store call, no allocation.
func (p *Proxy) limitInFlight(route config.Route, next http.Handler) http.Handler {
	if route.MaxInFlight <= 0 || p.inflight == nil {
		return next
	}
	limit := inflight.Limit{Route: route.Name, Max: route.MaxInFlight, Hold: route.Hold, PerClient: route.HoldPerClient}
	perClient := route.Hold > 0 && route.HoldPerClient > 0
	inFlight := p.metrics.RouteInFlight.WithLabelValues(route.Name)
	held := make(map[string]prometheus.Counter, len(metrics.HeldResults))
	for _, result := range metrics.HeldResults {
		held[result] = p.metrics.RouteHeld.WithLabelValues(route.Name, result)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := web.RequestFrom(r.Context())
		if e, degraded := info.StoreDegraded(requireInFlight); degraded {
			p.inFlightStoreFailed(w, r, next, held, e)
			return
		}
		// The body is read before a slot is taken: a slot never waits for a slow upload.
		if e := readBody(r, p.maxBodyBytes); e != nil {
			p.responder.Error(w, r, e)
			return
		}
		client := ""
		if perClient {
			client = holdClient(info)
		}
		lease, waited, err := p.inflight.Acquire(r.Context(), limit, client)
		switch {
		case err == nil:
		case errors.Is(err, inflight.ErrClientBusy):
			held[metrics.HeldClientBusy].Inc()
			p.busy(w, r)
			return
		case errors.Is(err, inflight.ErrBusy):
			held[metrics.HeldBusy].Inc()
			p.busy(w, r)
			return
		case r.Context().Err() != nil:
			held[metrics.HeldGone].Inc()
			return // the visitor left while waiting (logged as 499)
		default:
			p.inFlightStoreFailed(w, r, next, held, info.StoreFailed(requireInFlight, err))
			return
		}
		if waited {
			held[metrics.HeldWaited].Inc()
		} else {
			held[metrics.HeldImmediate].Inc()
		}
		inFlight.Inc()
		// The slot is the origin's until its answer is done: a visitor who hangs up does not end the
		// request at the origin before the origin answered (it would go on working on it unseen, beside
		// the next request let in). The answer's headers decide when it is done (spool.go): a stream at
		// once, an answer up to spool_bytes once it is in edgeq's memory, a longer one once the visitor
		// has it. Deferred too, so a failed round trip or an aborted copy also gives the slot back.
		s := &slot{lease: lease, gauge: inFlight}
		fwd, done := web.OutlastVisitor(r)
		defer func() {
			done()
			s.release()
		}()
		next.ServeHTTP(w, withSlot(fwd, s))
	})
}

// holdClient names the client of a request in a hold line (hold_per_client): its token's queue request
// id when it has a valid one (the queue step set it), else its address after trusted_proxies, an IPv6
// address by its /64 (what one subscriber is given, and can pick any address of).
func holdClient(info *web.Request) string {
	switch {
	case info.QueueRequestID != "":
		return "token " + info.QueueRequestID
	case info.ClientIP.Is4() || info.ClientIP.Is4In6():
		return "address " + info.ClientIP.Unmap().String()
	case info.ClientIP.IsValid():
		prefix, _ := info.ClientIP.WithZone("").Prefix(64)
		return "address " + prefix.String()
	}
	return ""
}

// inFlightStoreFailed answers for a route whose in-flight limit cannot use the store with what its
// on_store_error decided (e: web.Request.StoreFailed, or StoreDegraded before any call). Open (e nil),
// the request goes on without the limit.
func (p *Proxy) inFlightStoreFailed(w http.ResponseWriter, r *http.Request, next http.Handler, held map[string]prometheus.Counter, e *web.Error) {
	held[metrics.HeldStoreError].Inc()
	if e != nil {
		p.responder.Error(w, r, e)
		return
	}
	next.ServeHTTP(w, r)
}

// BusyPage is the data of busy.html.
type BusyPage struct {
	web.ErrorPage
	// RefreshSeconds > 0: the page reloads itself after this many seconds (a GET or HEAD, which a
	// reload repeats); 0 for a form post, which a reload would not send again.
	RefreshSeconds int
}

// busy answers 503 BUSY with Retry-After: the busy page for a browser navigation, the JSON error (or
// the route's refusal.json) otherwise.
func (p *Proxy) busy(w http.ResponseWriter, r *http.Request) {
	e := web.ErrBusy
	if !web.IsNavigation(r) {
		p.responder.Error(w, r, e)
		return
	}
	seconds := int((e.RetryAfter + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(seconds))
	page := BusyPage{ErrorPage: web.ErrorPage{PageBase: p.responder.Base(r), Status: e.Status, Code: e.Code}}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		page.RefreshSeconds = seconds
	}
	p.responder.Page(w, r, e.Status, "busy.html", page)
}

// readBody reads a request's body, up to limit bytes, before its slot is taken, and puts an identical
// one back. A larger body (an upload) streams its remainder to the origin while the slot is held. A
// body already read by an earlier step (admission) is left as it is.
func readBody(r *http.Request, limit int64) *web.Error {
	if r.Body == nil || r.Body == http.NoBody || r.GetBody != nil {
		return nil
	}
	head, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return web.ErrMalformedBody.Because(err)
	}
	if int64(len(head)) <= limit {
		_ = r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(head))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(head)), nil }
		return nil
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	return nil
}
