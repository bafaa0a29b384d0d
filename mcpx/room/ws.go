package room

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/cvmgo/cvm/internal/wsconn"
	"github.com/cvmgo/cvm/mcpx"
)

// serveWS is GET /v0/ws?topic=NAME. Every refusal happens before the
// upgrade, as an HTTP status with a JSON body: a client never sees a 101
// followed by a close for something the request already showed.
func (g *Gateway) serveWS(w http.ResponseWriter, r *http.Request) {
	if !headerHasToken(r.Header, "Connection", "upgrade") || !headerHasToken(r.Header, "Upgrade", "websocket") {
		w.Header().Set("Upgrade", "websocket")
		g.refuse(w, r, &httpError{http.StatusUpgradeRequired, mcpx.CodeBadRequest, "this endpoint is a WebSocket: connect with a WebSocket client"})
		return
	}
	name := r.URL.Query().Get("topic")
	if name == "" {
		g.refuse(w, r, &httpError{http.StatusBadRequest, mcpx.CodeBadRequest, "topic parameter required: GET /v0/ws?topic=NAME"})
		return
	}
	if err := mcpx.ValidateTopic(name); err != nil {
		g.refuse(w, r, &httpError{http.StatusBadRequest, mcpx.CodeBadRequest, err.Error()})
		return
	}
	if !g.originAllowed(r) {
		g.refuse(w, r, &httpError{http.StatusForbidden, mcpx.CodeBadOrigin,
			fmt.Sprintf("Origin %q is not allowed; the gateway operator can allow it with --allow-origin", r.Header.Get("Origin"))})
		return
	}
	claims, herr := g.authenticate(r, name)
	if herr != nil {
		g.refuse(w, r, herr)
		return
	}
	if herr := checkSubprotocols(r); herr != nil {
		g.refuse(w, r, herr)
		return
	}
	t, err := g.topic(name)
	if err != nil {
		g.refuse(w, r, &httpError{http.StatusServiceUnavailable, mcpx.CodeInternal, "the gateway is shutting down; reconnect shortly"})
		return
	}
	connID := newConnID()
	replaced, err := t.admit(r.Context(), claims.Participant(), connID)
	switch {
	case errors.Is(err, ErrTopicFull):
		g.refuse(w, r, &httpError{http.StatusForbidden, mcpx.CodeTopicFull,
			fmt.Sprintf("Topic %s is full (%d participants)", name, g.opts.MaxParticipants)})
		return
	case errors.Is(err, ErrRosterFull):
		g.refuse(w, r, &httpError{http.StatusForbidden, mcpx.CodeTopicFull,
			fmt.Sprintf("Topic %s is full: its roster has reached the NATS message size limit (the operator can raise NATS max_payload)", name)})
		return
	case err != nil:
		g.log.Warn("admission failed", "topic", name, "err", err)
		g.refuse(w, r, &httpError{http.StatusServiceUnavailable, mcpx.CodeUnavailable, "the gateway cannot reach NATS; try another gateway node, or again shortly"})
		return
	}
	release := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := g.backend.Release(ctx, name, claims.Subject, connID); err != nil {
			g.log.Warn("roster entry of a connection that never joined not removed", "topic", name, "participant", claims.Subject, "err", err)
		}
	}
	conn, err := wsconn.Accept(w, r, g.wsOptions())
	if err != nil {
		release()
		g.log.Info("websocket upgrade failed", "err", err, "remote", r.RemoteAddr)
		return
	}
	if conn.Subprotocol() == "" {
		g.log.Debug("client did not offer the mcp-x.v0 subprotocol", "participant", claims.Subject)
	}
	s := newSession(g, t, claims.Participant(), conn)
	s.connID, s.replaced = connID, replaced
	if !g.track(s) {
		release()
		conn.Close(closeGoingAway, "gateway shutting down")
		conn.Run()
		return
	}
	defer g.handlers.Done()
	defer g.untrack(s)
	s.run()
}

// newConnID names a connection in the roster.
func newConnID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// checkSubprotocols enforces version negotiation: a client that offers
// subprotocols must offer mcp-x.v0 among them. Clients that offer none
// (the reference client) are accepted.
func checkSubprotocols(r *http.Request) *httpError {
	offered := offeredSubprotocols(r)
	var others []string
	for _, p := range offered {
		if p == mcpx.Subprotocol {
			return nil
		}
		if !strings.HasPrefix(p, bearerPrefix) {
			others = append(others, p)
		}
	}
	if len(others) == 0 {
		return nil
	}
	return &httpError{http.StatusBadRequest, mcpx.CodeUnsupportedProtocol,
		fmt.Sprintf("subprotocols %s are not supported; offer %q", strings.Join(others, ", "), mcpx.Subprotocol)}
}

// headerHasToken reports whether a comma-separated header contains token,
// case-insensitively.
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
