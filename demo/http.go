package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// maxBodyBytes bounds request bodies; the real ones are a few dozen bytes.
const maxBodyBytes = 4 << 10

// retryAfterSeconds is the Retry-After of a 503: the pool usually recovers
// well within a second.
const retryAfterSeconds = 1

// httpAPI serves the JSON API, /healthz and /metrics.
type httpAPI struct {
	store   *store
	metrics metricsSource
	log     *slog.Logger
	now     func() time.Time
}

// handler routes the API. Every path answers the same way whatever its
// prefix: a known path with another method gets 405 with Allow, an unknown
// path 404, both with a JSON error body.
func (a *httpAPI) handler() http.Handler {
	mux := http.NewServeMux()
	routes := []struct {
		method, path string
		h            http.HandlerFunc
	}{
		{"GET", "/api/challenges", a.listChallenges},
		{"POST", "/api/players/{id}/goals/initialize", a.initializeGoals},
		{"PUT", "/api/players/{id}/active-challenge", a.setActiveChallenge},
		{"POST", "/api/players/{id}/rewards/claim", a.claimReward},
		{"GET", "/healthz", a.healthz},
		{"GET", "/metrics", a.serveMetrics},
	}
	for _, rt := range routes {
		mux.HandleFunc(rt.method+" "+rt.path, rt.h)
		allow := rt.method
		if rt.method == "GET" {
			allow = "GET, HEAD" // ServeMux serves HEAD with a GET route
		}
		// the method-less pattern catches the path's other methods
		mux.HandleFunc(rt.path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed",
				fmt.Sprintf("%s %s: method not allowed; allowed: %s", r.Method, r.URL.Path, allow))
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path))
	})
	return a.instrument(mux)
}

// statusRecorder remembers the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// instrument counts every request by route pattern and status. Requests no
// route matched are counted under route "other", so random paths cannot
// blow up the number of series.
func (a *httpAPI) instrument(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := a.now()
		rec := &statusRecorder{ResponseWriter: w}
		mux.ServeHTTP(rec, r)
		route := "other"
		// ServeMux sets r.Pattern to the matched pattern.
		if r.Pattern != "" && r.Pattern != "/" {
			route = patternPath(r.Pattern)
		}
		code := rec.code
		if code == 0 {
			code = http.StatusOK
		}
		a.metrics.http.observe(r.Method, route, strconv.Itoa(code), a.now().Sub(start))
	})
}

// patternPath drops the method from a ServeMux pattern.
func patternPath(p string) string {
	for i := 0; i < len(p); i++ {
		if p[i] == ' ' {
			return p[i+1:]
		}
	}
	return p
}

type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"internal","message":"encoding the response failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, code int, kind, msg string) {
	writeJSON(w, code, errorBody{Error: kind, Message: msg})
}

// fail maps a store error to a status. Overload answers at once with 503 and
// Retry-After, so a load generator sees back-pressure rather than a hang.
func (a *httpAPI) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, errPlayerNotFound):
		writeError(w, http.StatusNotFound, "player_not_found", "no player "+strconv.Quote(r.PathValue("id"))+"; initialize its goals first")
	case errors.Is(err, errChallengeNotFound):
		writeError(w, http.StatusNotFound, "challenge_not_found", err.Error())
	case errors.Is(err, errAlreadyClaimed):
		writeError(w, http.StatusConflict, "already_claimed", err.Error())
	case errors.Is(err, errOverloaded), errors.Is(err, errUnavailable):
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
		writeError(w, http.StatusServiceUnavailable, "overloaded", err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The client went away; nobody reads this.
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
		writeError(w, http.StatusServiceUnavailable, "canceled", err.Error())
	default:
		a.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "internal error")
	}
}

// playerID returns the validated {id} path value, or writes a 400.
func playerID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if err := validateID("player id", id); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_player_id", err.Error())
		return "", false
	}
	return id, true
}

type challengeRequest struct {
	ChallengeID string `json:"challenge_id"`
}

// decodeChallengeRequest reads {"challenge_id": "..."} strictly: one JSON
// object, no unknown fields, a valid ID; it writes the 400 itself. The
// Content-Type is not checked: load-test clients often send none or a
// wrong one (curl -d, k6 string bodies), and the body decides.
func decodeChallengeRequest(w http.ResponseWriter, r *http.Request) (challengeRequest, bool) {
	var req challengeRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		msg := "body must be a JSON object like {\"challenge_id\": \"daily-login\"}: " + err.Error()
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			msg = fmt.Sprintf("body is larger than %d bytes", maxBodyBytes)
		}
		writeError(w, http.StatusBadRequest, "invalid_body", msg)
		return req, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, "invalid_body", "body must hold exactly one JSON object")
		return req, false
	}
	if req.ChallengeID == "" {
		writeError(w, http.StatusBadRequest, "invalid_body", "challenge_id is required")
		return req, false
	}
	if err := validateID("challenge_id", req.ChallengeID); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_body", err.Error())
		return req, false
	}
	return req, true
}

type challengesResponse struct {
	Challenges []Challenge `json:"challenges"`
}

func (a *httpAPI) listChallenges(w http.ResponseWriter, r *http.Request) {
	cs, err := a.store.challenges(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, challengesResponse{Challenges: cs})
}

type playerResponse struct {
	PlayerID          string `json:"player_id"`
	ActiveChallengeID string `json:"active_challenge_id"`
	Goals             []Goal `json:"goals"`
	Created           bool   `json:"created"`
}

// initializeGoals answers 201 when it created the goals, 200 when they
// already existed (idempotent, so a retried request is harmless).
func (a *httpAPI) initializeGoals(w http.ResponseWriter, r *http.Request) {
	id, ok := playerID(w, r)
	if !ok {
		return
	}
	st, created, err := a.store.initializeGoals(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	writeJSON(w, code, playerResponse{PlayerID: id, ActiveChallengeID: st.ActiveChallengeID, Goals: st.Goals, Created: created})
}

type activeChallengeResponse struct {
	PlayerID          string `json:"player_id"`
	ActiveChallengeID string `json:"active_challenge_id"`
}

func (a *httpAPI) setActiveChallenge(w http.ResponseWriter, r *http.Request) {
	id, ok := playerID(w, r)
	if !ok {
		return
	}
	req, ok := decodeChallengeRequest(w, r)
	if !ok {
		return
	}
	st, err := a.store.setActiveChallenge(r.Context(), id, req.ChallengeID)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, activeChallengeResponse{PlayerID: id, ActiveChallengeID: st.ActiveChallengeID})
}

type claimResponse struct {
	PlayerID    string    `json:"player_id"`
	ChallengeID string    `json:"challenge_id"`
	Reward      Reward    `json:"reward"`
	ClaimedAt   time.Time `json:"claimed_at"`
}

// claimReward answers 200 for the first claim of an initialized player's
// challenge and 409 for every later one.
func (a *httpAPI) claimReward(w http.ResponseWriter, r *http.Request) {
	id, ok := playerID(w, r)
	if !ok {
		return
	}
	req, ok := decodeChallengeRequest(w, r)
	if !ok {
		return
	}
	c, err := a.store.claimReward(r.Context(), id, req.ChallengeID)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, claimResponse{PlayerID: id, ChallengeID: req.ChallengeID, Reward: c.Challenge.Reward, ClaimedAt: c.ClaimedAt.UTC()})
}

func (a *httpAPI) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "database": a.metrics.db.kind()})
}

func (a *httpAPI) serveMetrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", metricsContentType)
	if err := writeMetrics(w, a.metrics); err != nil {
		a.log.Warn("writing /metrics failed", "err", err)
	}
}
