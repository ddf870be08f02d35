package proxy

import "net/http"

// sharedCacheHeaders are the headers besides Cache-Control by which a shop lets caches in front keep
// an answer: the CDN-targeted fields (RFC 9213 and its vendor variants), Surrogate-Control (Akamai,
// Fastly, Varnish) and Expires (HTTP/1.0 caches, and HTTP/1.1 ones without max-age).
// They are written in their canonical form (net/http's, "Cdn-Cache-Control") so that dropping them
// costs no allocation on the request path.
var sharedCacheHeaders = []string{"Cdn-Cache-Control", "Cloudflare-Cdn-Cache-Control", "Surrogate-Control", "Expires"}

// privateNoStore is the one Cache-Control of an answer that carries a credential.
var privateNoStore = []string{"private, no-store"}

// uncacheable makes an answer to which edgeq added a credential (its cookies, Edgeq-Token) one that
// no cache keeps (docs/reference.md "Proxying"): a CDN in front of edgeq that kept the shop's
// "public, max-age=600" page would hand one visitor's token to the next. Cache-Control is replaced as a
// whole (s-maxage, public and every other directive go with it) and the shared-cache headers are
// dropped.
//
// Vary and Pragma are left as the shop sent them: no-store keeps any cache from storing the answer,
// so Vary changes nothing, and Pragma has no meaning in an answer (RFC 9111 section 5.4). A 304 is
// treated the same: a cache that revalidated its copy with it would otherwise merge the visitor's
// Set-Cookie into the stored answer and serve it on (RFC 9111 section 4.3.4); with no-store it may
// keep neither.
func uncacheable(h http.Header) {
	h["Cache-Control"] = privateNoStore
	for _, name := range sharedCacheHeaders {
		delete(h, name)
	}
}
