package participant

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Errors of the client, matched with errors.Is.
var (
	// ErrPeerLeft fails requests to a participant that left the topic.
	ErrPeerLeft = errors.New("mcpx: peer left the topic")
	// ErrRequestTimeout fails a request that got no answer within
	// Options.RequestTimeout; the peer was sent notifications/cancelled.
	ErrRequestTimeout = errors.New("mcpx: request timed out")
	// ErrHandshakeBackoff is returned while a peer's failed MCP handshake
	// waits out its backoff; it wraps the failure.
	ErrHandshakeBackoff = errors.New("mcpx: handshake with peer failed recently")
	// ErrNotSent: the gateway does not have the envelope, and the client
	// will not send it (SayConfirmed).
	ErrNotSent = errors.New("mcpx: envelope not sent")
	// ErrUnconfirmed: the envelope was written to the gateway, which may
	// or may not have published it; the client could not tell in time
	// (SayConfirmed).
	ErrUnconfirmed = errors.New("mcpx: envelope sent but not confirmed")
	// errConnClosed is what a per-peer mcp.Connection returns once closed.
	errConnClosed = fmt.Errorf("mcpx: %w", mcp.ErrConnectionClosed)
)

// GatewayError is an error envelope the gateway answered an envelope of
// ours with (docs/mcpx.md, decision 4).
type GatewayError struct {
	Code       mcpx.Code
	Message    string
	RetryAfter time.Duration
}

func (e *GatewayError) Error() string { return fmt.Sprintf("mcpx gateway: %s: %s", e.Code, e.Message) }

// Options configure a Client. Zero values select the defaults given.
type Options struct {
	// Gateway is the gateway's base URL: http://host:port (https, ws and
	// wss work too). Required, unless Gateways is set.
	Gateway string
	// Gateways are further base URLs of the same rooms: nodes of one
	// cluster (cvm room serve --nats), tried after Gateway, in order. When
	// the connection to one fails and it cannot be reached again, the
	// client moves to the next (wrapping around) and resumes there by seq,
	// as after a reconnect to the same gateway: no envelope lost or seen
	// twice. Connect tries them in order too, until one welcomes it.
	Gateways []string
	// Topic to join. Required.
	Topic string
	// Token is the bearer token. TokenSource, if set, is called instead
	// before every connection, so a rotated token is picked up when the
	// client reconnects.
	Token       string
	TokenSource func(context.Context) (string, error)

	// Server answers the MCP requests peers address to this participant.
	// Nil means a go-sdk server whose only tools are seed 001 §8.2's
	// chat.say and presence.get (AddRoomTools), so that every participant
	// still answers initialize and ping (seed 001 §3: every participant
	// behaves like an MCP server). Whatever the server, seed 002's shutdown
	// is answered by the client (PeerConn).
	Server PeerServer

	// ClientInfo and Capabilities are what this participant says in the
	// initialize it sends a peer before its first request (go-sdk sessions
	// over PeerTransport send their own). ProtocolVersion defaults to
	// DefaultProtocolVersion.
	ClientInfo      *mcp.Implementation
	Capabilities    *mcp.ClientCapabilities
	ProtocolVersion string

	// RequestTimeout fails a request that has no answer after this long
	// and tells the peer with notifications/cancelled (default 60 s; each
	// progress notification restarts the clock; negative: never).
	RequestTimeout time.Duration
	// PingInterval is how often the client pings the gateway (default 15 s;
	// negative: never). A ping unanswered within PingTimeout (default 10 s)
	// drops the connection and reconnects. An answered ping also confirms
	// every envelope written before it, which is how the client knows what
	// it need not re-check after a reconnect.
	PingInterval time.Duration
	PingTimeout  time.Duration
	// ReconnectMin and ReconnectMax bound the backoff between reconnect
	// attempts (defaults 100 ms and 30 s; it doubles, with jitter).
	ReconnectMin time.Duration
	ReconnectMax time.Duration
	// HandshakeRetryMin and HandshakeRetryMax bound how long a peer whose
	// MCP handshake failed is left alone before the next attempt (defaults
	// 1 s and 30 s, doubling): many callers of an unwell peer must not turn
	// into a handshake storm.
	HandshakeRetryMin time.Duration
	HandshakeRetryMax time.Duration

	// OnEvent, if set, is called for presence, chat, other notifications
	// and connection changes, in order, from the client's receive
	// goroutine. It must return quickly: every other envelope waits.
	OnEvent func(Event)

	// HTTPClient is used for the WebSocket upgrade and the history
	// endpoint (default: a client of the participant's own, whose idle
	// connections Close closes).
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// gatewayList is Gateway then Gateways, without empty entries.
func (o *Options) gatewayList() []string {
	var out []string
	for _, g := range append([]string{o.Gateway}, o.Gateways...) {
		if g != "" {
			out = append(out, g)
		}
	}
	return out
}

func (o *Options) defaults() error {
	if len(o.gatewayList()) == 0 || o.Topic == "" {
		return errors.New("mcpx: Options.Gateway (or Gateways) and Topic are required")
	}
	if err := mcpx.ValidateTopic(o.Topic); err != nil {
		return err
	}
	if o.Token == "" && o.TokenSource == nil {
		return errors.New("mcpx: a Token or a TokenSource is required")
	}
	if o.ProtocolVersion == "" {
		o.ProtocolVersion = mcpx.DefaultProtocolVersion
	}
	if o.ClientInfo == nil {
		o.ClientInfo = &mcp.Implementation{Name: "cvm-mcpx", Version: "0"}
	}
	o.RequestTimeout = cmp.Or(o.RequestTimeout, 60*time.Second)
	o.PingInterval = cmp.Or(o.PingInterval, 15*time.Second)
	o.PingTimeout = cmp.Or(o.PingTimeout, 10*time.Second)
	o.ReconnectMin = cmp.Or(o.ReconnectMin, 100*time.Millisecond)
	o.ReconnectMax = cmp.Or(o.ReconnectMax, 30*time.Second)
	o.HandshakeRetryMin = cmp.Or(o.HandshakeRetryMin, time.Second)
	o.HandshakeRetryMax = cmp.Or(o.HandshakeRetryMax, 30*time.Second)
	if o.HTTPClient == nil {
		// A client of its own, whose idle connections Close closes: the
		// default client's would outlive the participant.
		o.HTTPClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// EventType says what an Event reports.
type EventType string

const (
	// EventConnected: the client joined (or rejoined after a reconnect);
	// Participant is this participant, Participants the others.
	EventConnected EventType = "connected"
	// EventDisconnected: the connection ended (Err says why); the client
	// reconnects on its own.
	EventDisconnected EventType = "disconnected"
	// EventJoin and EventLeave: presence. On a reconnect the differences
	// between the old roster and the new one are reported this way too.
	EventJoin  EventType = "join"
	EventLeave EventType = "leave"
	// EventChat: a notifications/chat/message, ours included.
	EventChat EventType = "chat"
	// EventNotification: another MCP notification addressed to us (or
	// broadcast), e.g. a peer's tools/list_changed.
	EventNotification EventType = "notification"
	// EventError: the gateway refused an envelope of ours (Err is a
	// *GatewayError).
	EventError EventType = "error"
)

// Event is something the client saw. Which fields are set depends on Type.
type Event struct {
	Type         EventType
	Participant  mcpx.Participant   // connected (self), join, leave
	Participants []mcpx.Participant // connected
	Reason       mcpx.LeaveReason   // leave
	Envelope     *mcpx.Envelope     // chat, notification, error
	Chat         *ChatMessage       // chat
	Method       string             // notification
	// Replayed is set for envelopes read from history after a reconnect:
	// they were published while this participant was away.
	Replayed bool
	Err      error // disconnected, error
}

// Client is one participant of a topic. It keeps its connection to the
// gateway (reconnecting with backoff and resuming from history by seq, so
// that no envelope is lost or seen twice), a roster, MCP sessions with peers
// (PeerTransport, Request) and answers peers with its Server. Create it with
// Connect and stop it with Close; it is safe for concurrent use.
type Client struct {
	opts    Options
	ownHTTP bool // opts.HTTPClient is the client's own, to close
	log     *slog.Logger
	eps     []endpoint // the gateways, in the order they are tried

	ctx    context.Context // the client's lifetime; Close cancels it
	cancel context.CancelFunc
	wg     sync.WaitGroup // the run loop, servers, timers' goroutines

	// pending are our requests in flight, with a lock of their own.
	pending *pendingTable

	mu        sync.Mutex
	cur       int             // index in eps of the gateway connected last
	conn      *websocket.Conn // nil while disconnected
	ready     chan struct{}   // closed while connected
	gen       int             // connection generation
	scanned   int             // the generation whose resume last checked the outbox
	closed    bool
	self      mcpx.Participant
	roster    map[string]mcpx.Participant
	absent    map[string]int // peers missing after our reconnect, in their grace (peerAbsent)
	lastSeq   uint64         // highest seq processed
	history   bool           // the gateway keeps history (resume possible)
	pageLimit int
	token     string // the token of the current connection

	out outbox
	// wlock (a token) is held from an envelope's place in the outbox to
	// the end of its write, so that outbox order is wire order: finding
	// one envelope in history then confirms every earlier one (pinger).
	wlock    chan struct{}
	peers    map[string]*peerState
	servers  map[string]*PeerConn         // server side, per peer
	sessions map[string][]*clientSideConn // go-sdk client sessions, per peer
	onceLog  map[string]bool
	saidFor  map[string]string // chat.say envelope id -> the peer that called it, until the echo
}

// Connect joins the topic and returns once the gateway welcomed this
// participant. A refusal (bad token, wrong topic, full topic) is an error
// here; once connected, the client reconnects by itself until Close.
func Connect(ctx context.Context, opts Options) (*Client, error) {
	ownHTTP := opts.HTTPClient == nil
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	var eps []endpoint
	for _, g := range opts.gatewayList() {
		ws, rest, err := gatewayURLs(g, opts.Topic)
		if err != nil {
			return nil, err
		}
		eps = append(eps, endpoint{ws: ws, rest: rest})
	}
	c := &Client{
		opts:     opts,
		ownHTTP:  ownHTTP,
		log:      opts.Logger.With("topic", opts.Topic),
		eps:      eps,
		ready:    make(chan struct{}),
		roster:   map[string]mcpx.Participant{},
		absent:   map[string]int{},
		out:      newOutbox(),
		pending:  newPendingTable(opts.RequestTimeout),
		peers:    map[string]*peerState{},
		servers:  map[string]*PeerConn{},
		sessions: map[string][]*clientSideConn{},
		onceLog:  map[string]bool{},
		saidFor:  map[string]string{},
		wlock:    make(chan struct{}, 1),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	cs, err := c.dialFirst(ctx)
	if err != nil {
		c.cancel()
		return nil, err
	}
	if c.opts.Server == nil {
		s := mcp.NewServer(&mcp.Implementation{Name: cs.self.ID, Version: "0"}, nil)
		AddRoomTools(s, c)
		c.opts.Server = SDKServer(s)
	}
	started := make(chan error, 1)
	c.wg.Add(1)
	go c.run(cs, started)
	if err := <-started; err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// endpoint is one gateway's WebSocket endpoint and its topic's REST base
// (.../v0/topics/{topic}).
type endpoint struct{ ws, rest string }

// dialFirst connects to the first gateway that welcomes us, in order. A
// refusal (bad token, full topic: an HTTP 4xx) is the cluster's answer,
// not one node's, and is returned at once.
func (c *Client) dialFirst(ctx context.Context) (*connState, error) {
	var errs []error
	for i := range c.eps {
		cs, err := c.dial(ctx, i)
		if err == nil {
			return cs, nil
		}
		var herr *HTTPError
		if len(c.eps) == 1 || ctx.Err() != nil || (errors.As(err, &herr) && herr.Status < 500) {
			return nil, err
		}
		c.log.Info("gateway unreachable; trying the next", "gateway", c.eps[i].ws, "err", err)
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// restURL is the topic's REST base on the gateway connected last.
func (c *Client) restURL() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.eps[c.cur].rest
}

// gatewayURLs derives the WebSocket endpoint and the topic's REST base
// from the gateway's base URL.
func gatewayURLs(base, topic string) (ws, rest string, err error) {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || u.Host == "" {
		return "", "", fmt.Errorf("mcpx: gateway %q: want a URL like http://127.0.0.1:7070", base)
	}
	u.Path = strings.TrimSuffix(u.Path, "/v0/ws")
	httpScheme, wsScheme := "http", "ws"
	switch u.Scheme {
	case "http", "ws":
	case "https", "wss":
		httpScheme, wsScheme = "https", "wss"
	default:
		return "", "", fmt.Errorf("mcpx: gateway %q: scheme must be http, https, ws or wss", base)
	}
	h, w := *u, *u
	h.Scheme, w.Scheme = httpScheme, wsScheme
	w.Path += "/v0/ws"
	w.RawQuery = url.Values{"topic": {topic}}.Encode()
	h.Path += "/v0/topics/" + url.PathEscape(topic)
	h.RawQuery = ""
	return w.String(), h.String(), nil
}

// Self is this participant, as the gateway announced it.
func (c *Client) Self() mcpx.Participant {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.self
}

// Participants are the other participants present, sorted by id.
func (c *Client) Participants() []mcpx.Participant {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]mcpx.Participant, 0, len(c.roster))
	for _, p := range c.roster {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Close leaves the topic: it closes the connection, fails what is still in
// flight with mcp.ErrConnectionClosed, ends every peer session and waits
// for the client's goroutines.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	conn := c.conn
	c.mu.Unlock()
	if conn != nil {
		// An orderly close, so the others see this participant leave now
		// rather than after the gateway's ping timeout.
		conn.Close(websocket.StatusNormalClosure, "leaving")
	}
	c.cancel()
	pend := c.pending.close()
	c.mu.Lock()
	var conns []interface{ Close() error }
	for _, s := range c.servers {
		conns = append(conns, s)
	}
	for _, list := range c.sessions {
		for _, s := range list {
			conns = append(conns, s)
		}
	}
	c.mu.Unlock()
	for _, p := range pend {
		p.sink.fail(p, errConnClosed)
	}
	for _, s := range conns {
		s.Close()
	}
	c.wg.Wait()
	if c.ownHTTP {
		c.opts.HTTPClient.CloseIdleConnections()
	}
	return nil
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *Client) emit(e Event) {
	if c.opts.OnEvent != nil {
		c.opts.OnEvent(e)
	}
}

// go runs f in a goroutine the client owns: Close waits for it.
func (c *Client) goOwned(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

// bearer returns the token for the next connection.
func (c *Client) bearer(ctx context.Context) (string, error) {
	if c.opts.TokenSource != nil {
		tok, err := c.opts.TokenSource(ctx)
		if err != nil {
			return "", fmt.Errorf("mcpx: token source: %w", err)
		}
		return strings.TrimSpace(tok), nil
	}
	return c.opts.Token, nil
}

// HistoryQuery selects a page of the topic's history (docs/mcpx.md,
// decision 8). Before and After are exclusive cursors: a seq, an envelope
// id or an RFC 3339 time. Limit 0 is the gateway's default page.
type HistoryQuery struct {
	Limit  int
	Before string
	After  string
}

// History reads a page of the topic's history, most recent first, as this
// participant may see it; more reports that the page is not the last.
func (c *Client) History(ctx context.Context, q HistoryQuery) (envs []*mcpx.Envelope, more bool, err error) {
	c.mu.Lock()
	tok := c.token
	c.mu.Unlock()
	raws, more, err := c.historyPage(ctx, tok, q)
	if err != nil {
		return nil, false, err
	}
	for _, raw := range raws {
		e, err := mcpx.DecodeDelivered(raw)
		if err != nil {
			return nil, false, fmt.Errorf("mcpx: history: %w", err)
		}
		envs = append(envs, e)
	}
	return envs, more, nil
}

// historyPage is one GET of the history endpoint.
func (c *Client) historyPage(ctx context.Context, token string, q HistoryQuery) ([]json.RawMessage, bool, error) {
	v := url.Values{}
	if q.Limit > 0 {
		v.Set("limit", fmt.Sprint(q.Limit))
	}
	if q.Before != "" {
		v.Set("before", q.Before)
	}
	if q.After != "" {
		v.Set("after", q.After)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.restURL()+"/history?"+v.Encode(), nil)
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, false, fmt.Errorf("mcpx: history: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, false, fmt.Errorf("mcpx: history: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, false, httpRefusal("history", resp.StatusCode, body)
	}
	var page struct {
		History []json.RawMessage `json:"history"`
		HasMore bool              `json:"has_more"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, false, fmt.Errorf("mcpx: history: %w", err)
	}
	return page.History, page.HasMore, nil
}

// HTTPError is a refusal by the gateway's HTTP side: the WebSocket upgrade
// or a REST call, with the JSON body's code and message.
type HTTPError struct {
	Op      string
	Status  int
	Code    mcpx.Code
	Message string
}

func (e *HTTPError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("mcpx: %s: HTTP %d", e.Op, e.Status)
	}
	return fmt.Sprintf("mcpx: %s: HTTP %d %s: %s", e.Op, e.Status, e.Code, e.Message)
}

func httpRefusal(op string, status int, body []byte) error {
	var b struct {
		Error string    `json:"error"`
		Code  mcpx.Code `json:"code"`
	}
	json.Unmarshal(body, &b)
	return &HTTPError{Op: op, Status: status, Code: b.Code, Message: b.Error}
}
