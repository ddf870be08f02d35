package hcaptchatest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, u string, form url.Values) (int, map[string]any) {
	t.Helper()
	resp, err := http.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

func codes(body map[string]any) []string {
	var out []string
	list, _ := body["error-codes"].([]any)
	for _, c := range list {
		out = append(out, c.(string))
	}
	return out
}

// What the widget asks for when the box is ticked: a response for its site key and the page's
// hostname, which siteverify then accepts once, naming that hostname.
func TestWidgetTokenVerifiesOnce(t *testing.T) {
	s := New()
	srv := httptest.NewServer(s)
	defer srv.Close()

	for path, ct := range map[string]string{"/1/api.js": "text/javascript", "/1/widget.css": "text/css"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ct) {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	if s.Styles.Load() != 1 {
		t.Fatalf("style sheet fetches counted %d", s.Styles.Load())
	}

	status, body := post(t, srv.URL+"/1/token", url.Values{"sitekey": {SiteKey}, "hostname": {"shop.example"}})
	response, _ := body["response"].(string)
	if status != 200 || response == "" {
		t.Fatalf("token: %d %v", status, body)
	}
	if status, body := post(t, srv.URL+"/1/token", url.Values{"sitekey": {TestSiteKey}}); status != 200 || body["response"] != TestResponse {
		t.Fatalf("test site key: %d %v", status, body)
	}
	if status, _ := post(t, srv.URL+"/1/token", url.Values{"sitekey": {"unknown"}}); status != http.StatusForbidden {
		t.Fatalf("unknown site key: %d", status)
	}

	form := url.Values{"secret": {Secret}, "response": {response}, "sitekey": {SiteKey}, "remoteip": {"203.0.113.9"}}
	_, body = post(t, srv.URL+"/siteverify", form)
	if body["success"] != true || body["hostname"] != "shop.example" || body["credit"] != false {
		t.Fatalf("first use: %v", body)
	}
	if ts, err := time.Parse(time.RFC3339, body["challenge_ts"].(string)); err != nil || time.Since(ts) > time.Minute {
		t.Fatalf("challenge_ts %v", body["challenge_ts"])
	}
	if _, body = post(t, srv.URL+"/siteverify", form); body["success"] != false || !slices.Equal(codes(body), []string{"already-seen-response"}) {
		t.Fatalf("second use: %v", body)
	}
	if s.LastForm().Get("remoteip") != "203.0.113.9" || s.Calls.Load() != 2 {
		t.Fatalf("last form %v, calls %d", s.LastForm(), s.Calls.Load())
	}
}

// Every documented error code the stand-in answers, with what brings it about.
func TestSiteverifyErrorCodes(t *testing.T) {
	s := New()
	srv := httptest.NewServer(s)
	defer srv.Close()
	for _, c := range []struct {
		name string
		form url.Values
		code string
	}{
		{"no secret", url.Values{"response": {s.Mint("a")}}, "missing-input-secret"},
		{"unknown secret", url.Values{"secret": {"0xnope"}, "response": {s.Mint("a")}}, "invalid-input-secret"},
		{"no response", url.Values{"secret": {Secret}}, "missing-input-response"},
		{"garbage", url.Values{"secret": {Secret}, "response": {"x.y"}}, "invalid-input-response"},
		{"forged", url.Values{"secret": {Secret}, "response": {New().Mint("a")}}, "invalid-input-response"},
		{"expired", url.Values{"secret": {Secret}, "response": {s.MintAt("a", time.Now().Add(-TokenLifetime-time.Minute))}}, "expired-input-response"},
		{"bad remoteip", url.Values{"secret": {Secret}, "response": {s.Mint("a")}, "remoteip": {"nowhere"}}, "invalid-remoteip"},
		{"another site key", url.Values{"secret": {Secret}, "response": {s.Mint("a")}, "sitekey": {TestSiteKey}}, "sitekey-secret-mismatch"},
		{"test secret, other site key", url.Values{"secret": {TestSecret}, "response": {TestResponse}, "sitekey": {SiteKey}}, "sitekey-secret-mismatch"},
		{"test secret, real response", url.Values{"secret": {TestSecret}, "response": {s.Mint("a")}}, "not-using-dummy-passcode"},
	} {
		if _, body := post(t, srv.URL+"/siteverify", c.form); body["success"] != false || !slices.Equal(codes(body), []string{c.code}) {
			t.Errorf("%s: %v, want %s", c.name, body, c.code)
		}
	}
	// The test keys pass the test response, again and again.
	for range 2 {
		form := url.Values{"secret": {TestSecret}, "response": {TestResponse}, "sitekey": {TestSiteKey}}
		if _, body := post(t, srv.URL+"/siteverify", form); body["success"] != true || body["hostname"] != TestHostname {
			t.Fatalf("test keys: %v", body)
		}
	}
	// A JSON body is not what siteverify takes.
	resp, err := http.Post(srv.URL+"/siteverify", "application/json", strings.NewReader(`{"secret":"x","response":"y"}`))
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if !slices.Equal(codes(body), []string{"bad-request"}) {
		t.Fatalf("JSON body: %v", body)
	}
	s.RequireRemoteIP.Store(true)
	if _, body := post(t, srv.URL+"/siteverify", url.Values{"secret": {Secret}, "response": {s.Mint("a")}}); !slices.Equal(codes(body), []string{"missing-remoteip"}) {
		t.Fatalf("required remoteip: %v", body)
	}
	s.Failures.Store(1)
	resp, err = http.PostForm(srv.URL+"/siteverify", url.Values{})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 500 {
		t.Fatalf("failure knob: %d", resp.StatusCode)
	}
}
