package demo

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzHTTPHandlers sends the service's JSON API any method, path and body.
// Whatever arrives: no panic, no 5xx but overload's 503, a JSON body on
// every answer but a redirect to a clean path (an error kind and message on
// 4xx), and 405 always with Allow. Seed corpus in testdata/fuzz/FuzzHTTPHandlers.
func FuzzHTTPHandlers(f *testing.F) {
	f.Add(uint8(1), "/api/players/p1/goals/initialize", []byte(""))
	f.Add(uint8(2), "/api/players/p1/active-challenge", []byte(`{"challenge_id":"score-5000"}`))
	f.Add(uint8(1), "/api/players/p1/rewards/claim", []byte(`{"challenge_id":"win-3-matches"}`))
	f.Add(uint8(1), "/api/players/p1/rewards/claim", []byte(`{"challenge_id":"a"}{}`))
	f.Add(uint8(0), "/api/challenges", []byte(nil))
	f.Add(uint8(3), "/healthz", []byte("x"))
	cfg := testConfig()
	h := newService(cfg, newTestMemDB(f, cfg, noSleep), discardLogger()).api.handler()
	methods := []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"}
	f.Fuzz(func(t *testing.T, m uint8, path string, body []byte) {
		if len(path) == 0 || path[0] != '/' {
			path = "/" + path
		}
		req, err := http.NewRequest(methods[int(m)%len(methods)], "http://127.0.0.1"+path, bytes.NewReader(body))
		if err != nil {
			return // not a request a client can send
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		code := rec.Code
		if code >= 500 && code != http.StatusServiceUnavailable {
			t.Fatalf("%s %q: status %d: %s", req.Method, path, code, rec.Body.String())
		}
		if code == http.StatusMethodNotAllowed && rec.Header().Get("Allow") == "" {
			t.Fatalf("%s %q: 405 without Allow", req.Method, path)
		}
		if code >= 300 && code < 400 {
			if rec.Header().Get("Location") == "" {
				t.Fatalf("%s %q: redirect %d without Location", req.Method, path, code)
			}
			return // ServeMux redirects unclean paths (/a/../b) to their clean form
		}
		if req.Method == "HEAD" || req.URL.Path == "/metrics" && code == http.StatusOK {
			return
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("%s %q: status %d with Content-Type %q: %s", req.Method, path, code, ct, rec.Body.String())
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s %q: status %d: not JSON: %q", req.Method, path, code, rec.Body.String())
		}
		if code >= 400 {
			var e errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" || e.Message == "" {
				t.Fatalf("%s %q: status %d without an error kind and message: %s", req.Method, path, code, rec.Body.String())
			}
		}
	})
}
