package server

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// rawH2 is an HTTP/2 client that writes the frames it is given, for requests Go's own client never
// sends: a Host beside a different :authority, a Content-Length the DATA frames disagree with,
// connection-specific headers.
type rawH2 struct {
	conn *tls.Conn
	fr   *http2.Framer
}

func dialH2(t *testing.T, base string) *rawH2 {
	t.Helper()
	u, _ := url.Parse(base)
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN chose %q, want h2", p)
	}
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return &rawH2{conn: conn, fr: fr}
}

// send writes one request on stream 1, its fields in the order given, then the DATA frames (the last
// one ends the stream), and returns what came back: "status N", "reset CODE" or "goaway CODE".
func (c *rawH2) send(t *testing.T, fields [][2]string, data ...string) string {
	t.Helper()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range fields {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndHeaders: true,
		EndStream: len(data) == 0}); err != nil {
		t.Fatal(err)
	}
	for i, d := range data {
		if err := c.fr.WriteData(1, i == len(data)-1, []byte(d)); err != nil {
			return "write: " + err.Error() // the server may have reset the stream already
		}
	}
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		frame, err := c.fr.ReadFrame()
		if err != nil {
			return "read: " + err.Error()
		}
		switch f := frame.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID == 1 {
				return "status " + f.PseudoValue("status")
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				return "reset " + f.ErrCode.String()
			}
		case *http2.GoAwayFrame:
			return "goaway " + f.ErrCode.String()
		}
	}
}

// HTTP/2 requests that could be read two ways never reach the shop in a form edgeq did not check:
// Go's HTTP/2 server refuses them (the outcome is pinned) or edgeq routes by the one reading the
// shop then gets. A well-formed request over the same raw client is admitted, so the harness is
// not what refuses the others.
func TestH2_AmbiguousRequestsNeverReachTheShopUnchecked(t *testing.T) {
	e := newTLSEdge(t)
	var mu sync.Mutex
	var seen []string
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		body.ReadFrom(r.Body)
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %s%s %q %v", r.Method, r.Host, r.URL.Path, body.String(), r.Header["Content-Length"]))
		mu.Unlock()
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(origin.Close)
	in := e.start(t, configText(origin.URL, `  - {name: page, match: "GET shop.example/products/{id}", queue: closed}
  - name: checkout
    match: "POST /checkout/{product}"
    admission: {type: stock, product: "path:product", user: "header:x-user"}
queues:
  - {id: closed, capacity: 0}
products:
  - {id: sneaker, stock: 10, per_user_limit: 5}`), nil)
	host := strings.TrimPrefix(in.tls, "https://")
	checkout := func(extra ...[2]string) [][2]string {
		return append([][2]string{{":method", "POST"}, {":scheme", "https"}, {":authority", host},
			{":path", "/checkout/sneaker"}, {"x-user", "mallory"}, {"content-type", "application/x-www-form-urlencoded"}}, extra...)
	}
	page := func(authority, hostHeader string) [][2]string {
		return [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", authority}, {":path", "/products/1"},
			{"host", hostHeader}, {"accept", "application/json"}}
	}
	for _, c := range []struct {
		what   string
		fields [][2]string
		data   []string
		want   string // the outcome
		shop   string // what the shop saw, "" for nothing
	}{
		{"a well-formed checkout", checkout([2]string{"content-length", "10"}), []string{"quantity=1"}, "status 200",
			`POST ` + host + `/checkout/sneaker "quantity=1" [10]`},
		{"Content-Length above the DATA sent", checkout([2]string{"content-length", "20"}), []string{"quantity=1"}, "status 400", ""},
		{"Content-Length above the DATA sent, on no route", [][2]string{{":method", "POST"}, {":scheme", "https"},
			{":authority", host}, {":path", "/plain"}, {"content-length", "20"}}, []string{"quantity=1"}, "status 400", ""},
		{"Content-Length below the DATA sent", checkout([2]string{"content-length", "3"}), []string{"quantity=1"}, "reset PROTOCOL_ERROR", ""},
		// The first value is the one checked against the DATA frames; edgeq frames the request anew,
		// so the shop gets one length, the body's, which is what edgeq read.
		{"two Content-Length values, the first the DATA's", checkout([2]string{"content-length", "10"}, [2]string{"content-length", "11"}),
			[]string{"quantity=1"}, "status 200", `POST ` + host + `/checkout/sneaker "quantity=1" [10]`},
		{"two Content-Length values, the first not the DATA's", checkout([2]string{"content-length", "11"}, [2]string{"content-length", "10"}),
			[]string{"quantity=1"}, "status 400", ""},
		{"Transfer-Encoding, connection-specific in HTTP/2", checkout([2]string{"transfer-encoding", "chunked"}),
			[]string{"a\r\nquantity=1\r\n0\r\n\r\n"}, "status 400", ""},
		// The request is routed by :authority, which is the Host the shop gets.
		{"the gated host in Host, another in :authority", page("elsewhere.example", "shop.example"), nil, "status 200",
			"GET elsewhere.example/products/1 \"\" []"},
		{"the gated host in :authority, another in Host", page("shop.example", "elsewhere.example"), nil, "status 403", ""},
	} {
		mu.Lock()
		seen = nil
		mu.Unlock()
		got := dialH2(t, in.tls).send(t, c.fields, c.data...)
		time.Sleep(50 * time.Millisecond) // anything that was forwarded has reached the shop
		mu.Lock()
		shop := strings.Join(seen, "; ")
		mu.Unlock()
		if got != c.want || shop != c.shop {
			t.Errorf("%s: %s, the shop saw %q; want %s and %q", c.what, got, shop, c.want, c.shop)
		}
	}
	if r, err := sendVia(e.client(t, "h2"), "GET", in.tls+"/_edgeq/products/sneaker", nil); err != nil || !strings.Contains(r.body, `"remaining_stock":8`) {
		t.Fatalf("stock after two admitted checkouts: %v %s", err, r.body)
	}
}
