package room

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/cvmgo/cvm/mcpx"
)

// bearerPrefix marks a token carried as a WebSocket subprotocol, the one
// header a browser lets a page set: new WebSocket(url, ["mcp-x.v0",
// "bearer." + token]). The gateway never selects it, so it is not echoed.
const bearerPrefix = "bearer."

// httpError is a refusal with its status and code, answered as JSON.
type httpError struct {
	status int
	code   mcpx.Code
	msg    string
}

func (e *httpError) Error() string { return e.msg }

// errorBody is the JSON body of every refused HTTP request.
type errorBody struct {
	Error string    `json:"error"`
	Code  mcpx.Code `json:"code"`
}

func writeError(w http.ResponseWriter, status int, code mcpx.Code, msg string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="mcpx"`)
	}
	writeJSON(w, status, errorBody{Error: msg, Code: code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (g *Gateway) refuse(w http.ResponseWriter, r *http.Request, e *httpError) {
	g.metrics.refused.WithLabelValues(string(e.code)).Inc()
	g.log.Info("request refused", "path", r.URL.Path, "status", e.status, "code", e.code, "reason", e.msg, "remote", r.RemoteAddr)
	writeError(w, e.status, e.code, e.msg)
}

// bearer finds the request's token: the Authorization header, or a
// "bearer.TOKEN" WebSocket subprotocol. A token in the query string is
// refused with a hint: URLs end up in logs.
func bearer(r *http.Request) (string, *httpError) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
			return "", &httpError{http.StatusUnauthorized, mcpx.CodeUnauthorized, "Authorization header must be: Bearer <token>"}
		}
		return strings.TrimSpace(tok), nil
	}
	for _, p := range offeredSubprotocols(r) {
		if tok, ok := strings.CutPrefix(p, bearerPrefix); ok && tok != "" {
			return tok, nil
		}
	}
	if r.URL.Query().Has("token") {
		return "", &httpError{http.StatusUnauthorized, mcpx.CodeUnauthorized,
			"tokens in the URL are not accepted (they end up in logs); send Authorization: Bearer <token>, or from a browser the subprotocol bearer.<token>"}
	}
	return "", &httpError{http.StatusUnauthorized, mcpx.CodeUnauthorized,
		"no token: send Authorization: Bearer <token> (mint one with: cvm room token --topic T --id ID)"}
}

func offeredSubprotocols(r *http.Request) []string {
	var out []string
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// authenticate verifies the request's token and that it admits to topic.
func (g *Gateway) authenticate(r *http.Request, topic string) (*Claims, *httpError) {
	tok, herr := bearer(r)
	if herr != nil {
		return nil, herr
	}
	c, err := g.opts.Tokens.Verify(tok, g.opts.Now())
	if err != nil {
		return nil, &httpError{http.StatusUnauthorized, mcpx.CodeUnauthorized, tokenProblem(err)}
	}
	if topic != "" && !c.Allows(topic) {
		return nil, &httpError{http.StatusForbidden, mcpx.CodeForbidden,
			fmt.Sprintf("token is not valid for topic %q (it admits to: %s)", topic, strings.Join(c.Audience, ", "))}
	}
	return c, nil
}

func tokenProblem(err error) string {
	msg := strings.TrimPrefix(err.Error(), ErrTokenInvalid.Error()+": ")
	if errors.Is(err, ErrTokenExpired) {
		return "token " + msg + "; mint a new one"
	}
	return "invalid token: " + msg
}

// originAllowed implements the Origin check for WebSocket upgrades. A
// browser page on another site must not be able to join a room with a
// token it obtained; other clients send no Origin.
func (g *Gateway) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	for _, pattern := range g.opts.AllowedOrigins {
		if ok, _ := path.Match(strings.ToLower(pattern), strings.ToLower(u.Host)); ok {
			return true
		}
	}
	return false
}
