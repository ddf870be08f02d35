package proxy

import (
	"bytes"
	"io"
	"net/http"
	"strings"

	"github.com/edgeq/edgeq/internal/web"
)

// keepAnswer keeps the body of the shop's answer (up to server.max_body_bytes) for a step that settles
// on it (answer: outcomes), and puts every byte back in front of the rest for the visitor. The answer
// is read after MarkAnswered: a visitor who leaves stops the read, and the answer is then not whole.
func (p *Proxy) keepAnswer(resp *http.Response, a *web.Answer) {
	if resp.Body == nil || resp.Body == http.NoBody {
		a.Whole = true
		return
	}
	kept, err := io.ReadAll(io.LimitReader(resp.Body, p.maxBodyBytes+1))
	a.Body, a.Encoding = kept, resp.Header.Get("Content-Encoding")
	a.Whole = err == nil && int64(len(kept)) <= p.maxBodyBytes
	resp.Body = answerBody{Reader: io.MultiReader(bytes.NewReader(kept), resp.Body), Closer: resp.Body}
}

type answerBody struct {
	io.Reader
	io.Closer
}

// acceptGzipOnly narrows the Accept-Encoding of a request whose answer edgeq reads (keepAnswer) to
// what it can decompress: gzip when the visitor takes it, else none.
func acceptGzipOnly(h http.Header) {
	ae := strings.ToLower(strings.Join(h.Values("Accept-Encoding"), ","))
	h.Del("Accept-Encoding")
	for _, part := range strings.Split(ae, ",") {
		coding, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		q = strings.ReplaceAll(strings.TrimSpace(q), " ", "")
		if strings.TrimSpace(coding) == "gzip" && q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000" {
			h.Set("Accept-Encoding", "gzip")
			return
		}
	}
}
