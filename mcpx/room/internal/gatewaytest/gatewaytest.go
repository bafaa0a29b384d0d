// Package gatewaytest is what the tests of package room and of its
// backends share: a gateway on a loopback port (Start), participants'
// raw WebSocket connections to it (Client) and the envelopes they read
// (Msg), and Harness, what a test body sees of one gateway or of several
// nodes sharing a backend.
package gatewaytest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/cvmgo/cvm/mcpx/roomtest"
)

// Gateway is a roomtest gateway (on a loopback port, with its own keys
// and, unless a Backend replaces it, history; closed when the test ends)
// with the options it runs with.
type Gateway struct {
	*roomtest.Gateway
	T    testing.TB
	Opts room.Options
}

// NewKeys returns fresh signing keys that live only in memory.
func NewKeys(t testing.TB) *room.Keys { return roomtest.NewKeys(t) }

// Start starts a gateway as roomtest.Start does: unless opts says
// otherwise it has history in a temporary directory (none with NoHistory,
// or with a Backend), no pings, and no rate limit.
func Start(t testing.TB, opts room.Options) *Gateway {
	t.Helper()
	g := roomtest.Start(t, opts)
	return &Gateway{Gateway: g, T: t, Opts: g.Options()}
}

// NoHistory in Options.History makes Start run a gateway with no
// history (a nil History would get the default temporary store).
var NoHistory = roomtest.NoHistory

// TokenOpt adjusts a token's claims.
type TokenOpt = func(*room.Claims)

// WithName sets the participant's name.
func WithName(n string) TokenOpt { return func(c *room.Claims) { c.Name = n } }

// WithKind sets the participant's kind.
func WithKind(k string) TokenOpt { return func(c *room.Claims) { c.Kind = k } }

// WithTopics sets the topics the token is for.
func WithTopics(t ...string) TokenOpt { return func(c *room.Claims) { c.Audience = t } }

// Client is a participant's WebSocket connection in a test.
type Client struct {
	T    testing.TB
	ID   string
	Conn *websocket.Conn
}

// Msg is a received envelope, decoded loosely so tests can see exactly
// which fields arrived.
type Msg struct {
	Raw           []byte
	Protocol      string          `json:"protocol"`
	ID            string          `json:"id"`
	TS            string          `json:"ts"`
	From          string          `json:"from"`
	To            []string        `json:"to"`
	Kind          string          `json:"kind"`
	CorrelationID string          `json:"correlation_id"`
	Payload       json.RawMessage `json:"payload"`
	Seq           uint64          `json:"seq"`
}

// field returns payload[key] decoded as any.
func (m *Msg) Field(key string) any {
	var p map[string]any
	json.Unmarshal(m.Payload, &p)
	return p[key]
}

func (m *Msg) Event() string {
	if e, ok := m.Field("event").(string); ok {
		return e
	}
	e, _ := m.Field("type").(string)
	return e
}

func (m *Msg) PresenceID() string {
	p, _ := m.Field("participant").(map[string]any)
	id, _ := p["id"].(string)
	return id
}

func (m *Msg) String() string { return string(m.Raw) }

// dial connects id to topic with a fresh token and reads nothing.
func (g *Gateway) Dial(topic, id string, opts ...TokenOpt) *Client {
	g.T.Helper()
	return g.DialToken(id, topic, g.Token(topic, id, opts...))
}

func (g *Gateway) DialToken(id, topic, token string) *Client {
	g.T.Helper()
	return g.DialWith(id, topic, token, nil)
}

// dialSlow connects a Client whose socket buffers bytes sparingly, to play a
// participant that stops reading.
func (g *Gateway) DialSlow(topic, id string) *Client {
	g.T.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: smallReceiveBuffer().DialContext}}
	return g.DialWith(id, topic, g.Token(topic, id), hc)
}

func (g *Gateway) DialWith(id, topic, token string, hc *http.Client) *Client {
	g.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(Patience))
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, g.WSURL+"?topic="+topic, &websocket.DialOptions{
		HTTPClient:   hc,
		HTTPHeader:   http.Header{"Authorization": {"Bearer " + token}},
		Subprotocols: []string{mcpx.Subprotocol},
	})
	if err != nil {
		body := ""
		if resp != nil {
			b, _ := io.ReadAll(resp.Body)
			body = fmt.Sprintf(" (HTTP %d %s)", resp.StatusCode, b)
		}
		g.T.Fatalf("dial %s as %s: %v%s", topic, id, err, body)
	}
	conn.SetReadLimit(64 << 20)
	c := &Client{T: g.T, ID: id, Conn: conn}
	g.T.Cleanup(func() { conn.CloseNow() })
	return c
}

// Join dials and consumes the welcome (and, in reference mode, the own join
// before it), returning the welcome.
func (g *Gateway) Join(topic, id string, opts ...TokenOpt) (*Client, *Msg) {
	g.T.Helper()
	c := g.Dial(topic, id, opts...)
	m := c.Read()
	if g.Opts.Compat == room.CompatReference {
		if m.Kind != mcpx.KindPresence || m.Event() != mcpx.PresenceJoin || m.PresenceID() != id {
			g.T.Fatalf("%s: first frame %s, want its own join", id, m)
		}
		m = c.Read()
	}
	if m.Kind != mcpx.KindSystem || m.Event() != "welcome" {
		g.T.Fatalf("%s: got %s, want the welcome", id, m)
	}
	return c, m
}

// Patience bounds each wait of the harness (a frame, a dial, a write),
// scaled by testwait's knob: long, as it only bounds how long a failing
// test takes to say so.
const Patience = 30 * time.Second

func (c *Client) Read() *Msg {
	c.T.Helper()
	m, err := c.TryRead(Patience)
	if err != nil {
		c.T.Fatalf("%s: read: %v", c.ID, err)
	}
	return m
}

// tryRead reads the next frame within d (scaled by testwait's knob).
func (c *Client) TryRead(d time.Duration) (*Msg, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(d))
	defer cancel()
	typ, data, err := c.Conn.Read(ctx)
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageText {
		return nil, fmt.Errorf("binary frame")
	}
	m := &Msg{Raw: data}
	if err := json.Unmarshal(data, m); err != nil {
		return nil, fmt.Errorf("frame %q is not an envelope: %v", data, err)
	}
	return m, nil
}

// readUntil reads until an envelope matching pred arrives.
func (c *Client) ReadUntil(pred func(*Msg) bool) *Msg {
	c.T.Helper()
	for i := 0; i < 1000; i++ {
		m := c.Read()
		if pred(m) {
			return m
		}
	}
	c.T.Fatalf("%s: nothing matched in 1000 frames", c.ID)
	return nil
}

func (c *Client) SendRaw(data string) {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(Patience))
	defer cancel()
	if err := c.Conn.Write(ctx, websocket.MessageText, []byte(data)); err != nil {
		c.T.Fatalf("%s: write: %v", c.ID, err)
	}
}

func (c *Client) Send(v any) {
	c.T.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.T.Fatal(err)
	}
	c.SendRaw(string(b))
}

var envCounter atomic.Int64

// env builds an envelope from c; payload is JSON text.
func (c *Client) Env(to []string, payload string) map[string]any {
	e := map[string]any{
		"protocol": mcpx.Protocol,
		"id":       fmt.Sprintf("env-%s-%d", c.ID, envCounter.Add(1)),
		"ts":       "2025-08-17T14:00:00Z",
		"from":     c.ID,
		"kind":     mcpx.KindMCP,
		"payload":  json.RawMessage(payload),
	}
	if to != nil {
		e["to"] = to
	}
	return e
}

func (c *Client) Chat(text string) map[string]any {
	e := c.Env(nil, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/chat/message","params":{"text":%q,"format":"plain"}}`, text))
	c.Send(e)
	return e
}

// expectError reads the next frame and checks it is an error envelope with
// code, correlated with correlation.
func (c *Client) ExpectError(code mcpx.Code, correlation string) *Msg {
	c.T.Helper()
	m := c.Read()
	if m.Kind != mcpx.KindSystem || m.From != mcpx.GatewayID || m.Event() != "error" || m.Field("type") != "error" ||
		m.Field("code") != string(code) || m.CorrelationID != correlation || len(m.To) != 1 || m.To[0] != c.ID {
		c.T.Fatalf("%s: got %s\nwant an error envelope, code %s, correlation_id %q, to [%s]", c.ID, m, code, correlation, c.ID)
	}
	if Msg, _ := m.Field("message").(string); Msg == "" {
		c.T.Fatalf("%s: error envelope without a message: %s", c.ID, m)
	}
	return m
}

// Barrier proves that nothing else is pending for the given clients: from
// broadcasts a marker chat and each Client's next frame must be it.
func Barrier(t testing.TB, from *Client, others ...*Client) {
	t.Helper()
	e := from.Chat("Barrier")
	for _, c := range append([]*Client{from}, others...) {
		m := c.Read()
		if m.ID != e["id"] {
			t.Fatalf("%s: got %s before the Barrier %s", c.ID, m, e["id"])
		}
	}
}

// get performs a GET with an optional bearer token and decodes the JSON
// body into out (if non-nil). It fails the test unless the body is JSON.
func (g *Gateway) Get(path, token string, out any) (int, http.Header) {
	g.T.Helper()
	req, _ := http.NewRequest("GET", g.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.T.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && path != "/metrics" {
		g.T.Fatalf("GET %s: %d with Content-Type %q: %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			g.T.Fatalf("GET %s: body %q: %v", path, body, err)
		}
	}
	return resp.StatusCode, resp.Header
}

// historyPage fetches a history page as viewer and returns the envelopes.
func (g *Gateway) HistoryPage(topic, viewer, query string) ([]Msg, bool) {
	g.T.Helper()
	var body struct {
		History []json.RawMessage `json:"history"`
		HasMore bool              `json:"has_more"`
		Error   string            `json:"error"`
	}
	code, _ := g.Get("/v0/topics/"+topic+"/history"+query, g.Token(topic, viewer), &body)
	if code != 200 {
		g.T.Fatalf("history%s: %d %s", query, code, body.Error)
	}
	out := make([]Msg, len(body.History))
	for i, raw := range body.History {
		out[i].Raw = raw
		json.Unmarshal(raw, &out[i])
	}
	return out, body.HasMore
}

func IDs(ms []Msg) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

// dialStatus attempts a WebSocket upgrade and returns the HTTP status and
// JSON body of a refusal (0 if the upgrade succeeded).
func (g *Gateway) DialStatus(query string, header http.Header, subprotocols ...string) (int, map[string]any) {
	g.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(Patience))
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, g.WSURL+query, &websocket.DialOptions{HTTPHeader: header, Subprotocols: subprotocols})
	if err == nil {
		conn.CloseNow()
		return 0, nil
	}
	if resp == nil {
		g.T.Fatalf("dial %s: %v", query, err)
		return 0, nil
	}
	var body map[string]any
	b, _ := io.ReadAll(resp.Body)
	if jerr := json.Unmarshal(b, &body); jerr != nil {
		g.T.Fatalf("refusal of %s is not JSON: %d %q", query, resp.StatusCode, b)
	}
	return resp.StatusCode, body
}

// metric reads a sample without labels from the gateway's /metrics, in
// the text format; ok is false when the gateway does not serve it.
func (g *Gateway) Metric(name string) (v float64, ok bool) {
	g.T.Helper()
	resp, err := http.Get(g.URL + "/metrics")
	if err != nil {
		g.T.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		g.T.Fatal(err)
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if rest, found := strings.CutPrefix(line, name+" "); found {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				g.T.Fatalf("metric %s: %q", name, line)
			}
			return v, true
		}
	}
	return 0, false
}

// ReadEnvelope reads the next frame that is not the gateway's (presence
// is not in the log, so it interleaves with it).
func (c *Client) ReadEnvelope() *Msg {
	c.T.Helper()
	for {
		if m := c.Read(); m.From != mcpx.GatewayID {
			return m
		}
	}
}
