package room

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/history"
)

// serveTopics is GET /v0/topics: the topics the caller's token admits to
// that exist here (they have participants or history). Topics the token
// does not name are never listed, not even their names.
func (g *Gateway) serveTopics(w http.ResponseWriter, r *http.Request) {
	claims, herr := g.authenticate(r, "")
	if herr != nil {
		g.refuse(w, r, herr)
		return
	}
	known, err := g.knownTopics()
	if err != nil {
		g.log.Error("listing topics", "err", err)
		g.refuse(w, r, &httpError{http.StatusInternalServerError, mcpx.CodeInternal, "could not list topics"})
		return
	}
	out := []string{}
	for _, t := range known {
		if claims.Allows(t) {
			out = append(out, t)
		}
	}
	writeJSON(w, http.StatusOK, map[string][]string{"topics": out})
}

// topicRequest authenticates a /v0/topics/{topic}/... request.
func (g *Gateway) topicRequest(w http.ResponseWriter, r *http.Request) (string, *Claims, bool) {
	name := r.PathValue("topic")
	if err := mcpx.ValidateTopic(name); err != nil {
		g.refuse(w, r, &httpError{http.StatusBadRequest, mcpx.CodeBadRequest, err.Error()})
		return "", nil, false
	}
	claims, herr := g.authenticate(r, name)
	if herr != nil {
		g.refuse(w, r, herr)
		return "", nil, false
	}
	return name, claims, true
}

// serveParticipants is GET /v0/topics/{topic}/participants.
func (g *Gateway) serveParticipants(w http.ResponseWriter, r *http.Request) {
	name, _, ok := g.topicRequest(w, r)
	if !ok {
		return
	}
	list := participants(g.backend.Members(name), "")
	writeJSON(w, http.StatusOK, map[string][]mcpx.Participant{"participants": list})
}

// historyResponse is the body of the history endpoint. HasMore is an extra
// field: more envelopes match beyond this page.
type historyResponse struct {
	History []json.RawMessage `json:"history"`
	HasMore bool              `json:"has_more"`
}

// serveHistory is GET /v0/topics/{topic}/history?limit&before&after. Pages
// are most recent first. before and after are exclusive cursors, each a
// seq (digits), an RFC 3339 time (compared with the time the gateway
// received the envelope) or the id of an envelope the caller may see. With
// after, even after=0, the page is the envelopes right after the cursor, so
// a reconnecting client can walk forward without a gap.
func (g *Gateway) serveHistory(w http.ResponseWriter, r *http.Request) {
	name, claims, ok := g.topicRequest(w, r)
	if !ok {
		return
	}
	h := g.hist
	if h == nil {
		g.refuse(w, r, &httpError{http.StatusNotFound, mcpx.CodeNotFound, "history is disabled on this gateway"})
		return
	}
	q := history.Query{Limit: g.opts.DefaultHistoryPage, Visible: g.visibleTo(claims.Subject)}
	params := r.URL.Query()
	if v := params.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil || n < 1:
			g.refuse(w, r, &httpError{http.StatusBadRequest, mcpx.CodeBadRequest, fmt.Sprintf("limit %q must be a positive integer", v)})
			return
		case n > g.opts.HistoryPageLimit:
			g.refuse(w, r, &httpError{http.StatusBadRequest, mcpx.CodeBadRequest, fmt.Sprintf("Limit cannot exceed %d", g.opts.HistoryPageLimit)})
			return
		}
		q.Limit = n
	}
	for _, c := range []struct {
		param  string
		cursor **history.Cursor
	}{{"before", &q.Before}, {"after", &q.After}} {
		v := params.Get(c.param)
		if v == "" {
			continue
		}
		cursor, herr := g.resolveCursor(r, name, c.param, v, q.Visible)
		if herr != nil {
			g.refuse(w, r, herr)
			return
		}
		*c.cursor = cursor
	}
	page, err := h.Query(r.Context(), name, q)
	if err != nil {
		g.log.Error("history query", "topic", name, "err", err)
		g.refuse(w, r, &httpError{http.StatusInternalServerError, mcpx.CodeInternal, "could not read history"})
		return
	}
	resp := historyResponse{History: make([]json.RawMessage, len(page.Records)), HasMore: page.More}
	for i, rec := range page.Records {
		resp.History[i] = rec.Data
	}
	writeJSON(w, http.StatusOK, resp)
}

// resolveCursor turns a cursor value into a seq or a time bound. An
// envelope id names the newest envelope with that id the reader may see
// (visible): one it may not see is unknown to it, as it is in pages.
func (g *Gateway) resolveCursor(r *http.Request, topic, param, v string, visible func(string, []string) bool) (*history.Cursor, *httpError) {
	if isDigits(v) {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, &httpError{http.StatusBadRequest, mcpx.CodeBadRequest, fmt.Sprintf("%s=%s: seq out of range", param, v)}
		}
		return history.AtSeq(n), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return history.AtTime(t), nil
	}
	n, ok, err := g.hist.Lookup(r.Context(), topic, v, visible)
	if err != nil {
		g.log.Error("history lookup", "topic", topic, "err", err)
		return nil, &httpError{http.StatusInternalServerError, mcpx.CodeInternal, "could not read history"}
	}
	if !ok {
		return nil, &httpError{http.StatusBadRequest, mcpx.CodeUnknownCursor,
			fmt.Sprintf("%s=%s names no envelope in the history of %s that you may read (it may have expired, or not be stored yet); use a seq cursor", param, v, topic)}
	}
	return history.AtSeq(n), nil
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// serveHealth is GET /healthz.
func (g *Gateway) serveHealth(w http.ResponseWriter, r *http.Request) {
	status, code := "ok", http.StatusOK
	body := map[string]any{
		"protocol": mcpx.Protocol,
		"uptime_s": g.opts.Now().Sub(g.started).Seconds(),
	}
	if node := g.backend.Node(); node != "" {
		// A node without NATS keeps its connections but can store and
		// deliver nothing: a load balancer should send newcomers elsewhere.
		body["node"] = node
		body["nats"] = "up"
		if !g.backend.Up() {
			body["nats"] = "down"
			status, code = "nats_down", http.StatusServiceUnavailable
		}
	}
	if g.isClosing() {
		status, code = "shutting_down", http.StatusServiceUnavailable
	}
	body["status"] = status
	writeJSON(w, code, body)
}
