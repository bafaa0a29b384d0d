package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"

	"net/http"
	"strings"
	"sync"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/httpserve"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPPath is where HTTPHandler serves MCP streamable HTTP.
const MCPPath = "/mcp"

// DIDDocumentPath is where HTTPHandler serves the server's DID document.
const DIDDocumentPath = "/.well-known/did.json"

// sessionHeader is streamable HTTP's session id header.
const sessionHeader = "Mcp-Session-Id"

// defaultMaxBody bounds one POST body (4 MiB, as the go-sdk's handler).
const defaultMaxBody = 4 << 20

// HTTPOptions configure the gateway's MCP endpoint over streamable HTTP.
// Every hook is optional: without Auth every caller is anonymous.
type HTTPOptions struct {
	// Auth wraps the MCP endpoint: it authenticates each HTTP request,
	// answers the ones it refuses itself (401 or 403 with a JSON body),
	// and makes the verified caller known to Caller through the request's
	// context.
	Auth func(next http.Handler) http.Handler
	// Caller is the DID Auth verified for the request's context.
	Caller func(ctx context.Context) (did string, ok bool)
	// Allowed says whether an authenticated DID may use the server (nil:
	// everyone). A refused DID gets 403; an anonymous caller gets 401 as
	// soon as Allowed is set, since nobody anonymous can be allowed.
	Allowed func(did string) bool
	// Principal is the Nostr key a DID stands for in the gateway's books
	// (admission, logs): by default, the key of a did:nostr, else a key
	// derived from the DID (so that each DID is one client).
	Principal func(did string) nostr.PubKey
	// Payments, when set, takes part in every MCP request after
	// authentication: Middleware may answer a request itself (a priced
	// tools/call without a paid quotation, the quotation methods), and
	// Annotate rewrites the results the upstream gives to the methods it
	// names (the capabilities of initialize, the prices of tools/list).
	Payments HTTPPayments
	// InjectCaller tells the upstream who calls: each request's
	// params._meta.clientDid is the caller's verified DID, and for a
	// did:nostr also params._meta.clientPubkey its key (CEP-16), as
	// Options.Server.InjectClientPubkey does over Nostr.
	InjectCaller bool
	// DIDDocument is served at DIDDocumentPath when set.
	DIDDocument json.RawMessage
	// MaxBodyBytes bounds one request body (default 4 MiB).
	MaxBodyBytes int64
}

// HTTPPayments is what the HTTP endpoint needs of a payment layer.
type HTTPPayments interface {
	Middleware(next http.Handler) http.Handler
	Annotate(method string, result json.RawMessage) json.RawMessage
}

// HTTPHandler serves the upstream over MCP streamable HTTP at MCPPath (and
// the DID document at DIDDocumentPath). Its client sessions are the
// gateway's like those of Nostr: they count against MaxSessions in
// PerClient mode, share the upstream in Shared mode, are reaped after
// IdleTimeout and end with Close. A session belongs to the caller that
// opened it: another caller using its id is told it does not exist.
func (g *Gateway) HTTPHandler(opts HTTPOptions) http.Handler {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = defaultMaxBody
	}
	if opts.Principal == nil {
		opts.Principal = PrincipalKey
	}
	h := &httpSessions{g: g, opts: opts, byID: make(map[string]*httpClientConn)}
	// The payment layer runs only once the request's session is known to
	// be the caller's, right before the session's transport: a quotation
	// spent on a request that a session check then refused would be
	// money lost. Without a session only its own methods reach it.
	h.noSession = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { missingSession(w) })
	if opts.Payments != nil {
		h.noSession = opts.Payments.Middleware(h.noSession)
	}
	var mcpHandler http.Handler = h
	mcpHandler = h.access(mcpHandler)
	if opts.Auth != nil {
		mcpHandler = opts.Auth(mcpHandler)
	}
	mux := http.NewServeMux()
	mux.Handle(MCPPath, mcpHandler)
	if len(opts.DIDDocument) > 0 {
		mux.HandleFunc("GET "+DIDDocumentPath, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/did+json")
			w.Write(opts.DIDDocument)
		})
	}
	return mux
}

// PrincipalKey is the Nostr key a DID stands for: the key of
// did:nostr:<hex>, else sha256 of the DID, and the zero key for an
// anonymous caller.
func PrincipalKey(did string) nostr.PubKey {
	if did == "" {
		return nostr.PubKey{}
	}
	if hexKey, ok := strings.CutPrefix(did, "did:nostr:"); ok {
		if pk, err := nostr.PubKeyFromHex(hexKey); err == nil {
			return pk
		}
	}
	return nostr.PubKey(sha256.Sum256([]byte(did)))
}

// WriteHTTPError answers an HTTP request the MCP endpoint refuses before
// MCP, with a JSON body {code, message}: code is stable and machine
// readable, message says what to do.
func WriteHTTPError(w http.ResponseWriter, status int, code, message string) {
	httpserve.WriteError(w, status, code, message)
}

// httpSessions routes the requests of streamable HTTP to client sessions.
type httpSessions struct {
	g         *Gateway
	opts      HTTPOptions
	noSession http.Handler // a POST without a session that is no initialize

	mu   sync.Mutex
	byID map[string]*httpClientConn
}

func (h *httpSessions) caller(ctx context.Context) string {
	if h.opts.Caller == nil {
		return ""
	}
	did, ok := h.opts.Caller(ctx)
	if !ok {
		return ""
	}
	return did
}

// access refuses a caller Allowed does not allow.
func (h *httpSessions) access(next http.Handler) http.Handler {
	if h.opts.Allowed == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		did := h.caller(r.Context())
		switch {
		case did == "":
			WriteHTTPError(w, http.StatusUnauthorized, "unauthorized", "this server serves only the clients it allows: sign requests with your DID (Authorization: DIDAuthV1)")
			return
		case !h.opts.Allowed(did):
			WriteHTTPError(w, http.StatusForbidden, "forbidden", did+" is not allowed on this server")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (h *httpSessions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost, http.MethodGet, http.MethodDelete:
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		WriteHTTPError(w, http.StatusMethodNotAllowed, "method_not_allowed", "MCP streamable HTTP takes POST, GET and DELETE")
		return
	}
	did := h.caller(r.Context())
	id := r.Header.Get(sessionHeader)
	if id == "" {
		h.open(w, r, did)
		return
	}
	h.mu.Lock()
	c := h.byID[id]
	h.mu.Unlock()
	if c == nil || c.did != did {
		// Someone else's session is as good as none: saying otherwise
		// would confirm that the id is live.
		WriteHTTPError(w, http.StatusNotFound, "session_not_found", "no such session (it ended, or the gateway restarted): initialize a new one")
		return
	}
	if r.Method == http.MethodDelete {
		c.Close()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes)
	}
	c.handler.ServeHTTP(w, r)
}

// open starts a client session with the initialize request r carries.
func (h *httpSessions) open(w http.ResponseWriter, r *http.Request, did string) {
	if r.Method != http.MethodPost {
		WriteHTTPError(w, http.StatusBadRequest, "missing_session", "no Mcp-Session-Id: POST an initialize request first")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			WriteHTTPError(w, http.StatusRequestEntityTooLarge, "too_large", "the request body is over the size limit")
			return
		}
		WriteHTTPError(w, http.StatusBadRequest, "bad_request", "could not read the request body")
		return
	}
	msg, err := jsonrpc.DecodeMessage(body)
	req, ok := msg.(*jsonrpc.Request)
	if err != nil || !ok || req.Method != mcpmsg.MethodInitialize || !req.IsCall() {
		if ok && req.Method != "tools/call" {
			// The payment layer's own methods need no session. A call
			// never reaches it here: it would spend a quotation on a
			// request that goes nowhere.
			r.Body = io.NopCloser(bytes.NewReader(body))
			h.noSession.ServeHTTP(w, r)
			return
		}
		missingSession(w)
		return
	}
	t := &mcp.StreamableServerTransport{SessionID: rand.Text()}
	conn, err := t.Connect(h.g.ctx)
	if err != nil {
		WriteHTTPError(w, http.StatusInternalServerError, "internal", "could not start a session")
		return
	}
	c := &httpClientConn{
		Connection: conn, t: t, did: did, key: h.opts.Principal(did),
		annotate: h.opts.Payments, methods: make(map[jsonrpc.ID]string),
		inject: h.opts.InjectCaller && did != "",
	}
	c.handler = http.Handler(t)
	if h.opts.Payments != nil {
		c.handler = h.opts.Payments.Middleware(t)
	}
	c.onClose = func() {
		h.mu.Lock()
		delete(h.byID, t.SessionID)
		h.mu.Unlock()
	}
	h.mu.Lock()
	h.byID[t.SessionID] = c
	h.mu.Unlock()
	if !h.g.serveConn(c) {
		c.Close()
		WriteHTTPError(w, http.StatusServiceUnavailable, "closed", "the gateway is shutting down")
		return
	}
	h.g.opts.Logger.Debug("http session opened", "session", t.SessionID[:8], "did", did)
	r.Body = io.NopCloser(bytes.NewReader(body))
	c.handler.ServeHTTP(w, r)
}

func missingSession(w http.ResponseWriter) {
	WriteHTTPError(w, http.StatusBadRequest, "missing_session", "no Mcp-Session-Id: the first request of a session must be initialize")
}

// httpClientConn is a client session of the HTTP endpoint, as the gateway sees
// it: the connection of the go-sdk's streamable server transport, the
// caller that opened it, and the results it rewrites.
type httpClientConn struct {
	mcp.Connection
	t        *mcp.StreamableServerTransport
	handler  http.Handler // t, behind the payment layer
	did      string
	key      nostr.PubKey
	annotate HTTPPayments
	inject   bool
	onClose  func()

	mu      sync.Mutex
	methods map[jsonrpc.ID]string // requests whose results Annotate may rewrite
	closed  bool
}

func (c *httpClientConn) Client() nostr.PubKey { return c.key }

func (c *httpClientConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		return msg, err
	}
	r, ok := msg.(*jsonrpc.Request)
	if ok && r.IsCall() && c.inject {
		fwd := *r
		fwd.Params = mcpmsg.SetMeta(fwd.Params, "clientDid", c.did)
		if strings.HasPrefix(c.did, "did:nostr:") {
			fwd.Params = mcpmsg.SetMeta(fwd.Params, "clientPubkey", c.key.Hex())
		}
		r, msg = &fwd, &fwd
	}
	if ok && r.IsCall() && c.annotate != nil {
		switch r.Method {
		case mcpmsg.MethodInitialize, "tools/list":
			c.mu.Lock()
			c.methods[r.ID] = r.Method
			c.mu.Unlock()
		}
	}
	return msg, nil
}

func (c *httpClientConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok && c.annotate != nil {
		c.mu.Lock()
		method, ok := c.methods[resp.ID]
		delete(c.methods, resp.ID)
		c.mu.Unlock()
		if ok && resp.Error == nil && len(resp.Result) > 0 {
			out := *resp
			out.Result = c.annotate.Annotate(method, resp.Result)
			msg = &out
		}
	}
	return c.Connection.Write(ctx, msg)
}

func (c *httpClientConn) Close() error {
	c.mu.Lock()
	first := !c.closed
	c.closed = true
	c.mu.Unlock()
	if first && c.onClose != nil {
		c.onClose()
	}
	return c.Connection.Close()
}
