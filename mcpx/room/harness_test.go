package room

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/history"
)

// testGateway is a gateway on a loopback port with its own keys and
// history, closed when the test ends.
type testGateway struct {
	*Server
	t     testing.TB
	keys  *Keys
	store *history.Store
	dir   string
	opts  Options
}

func testKeys(t testing.TB) *Keys {
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	k, err := NewKeys(ed, secret)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// startGateway starts a gateway. Unless opts says otherwise it has history
// in a temporary directory, no pings, and no rate limit.
func startGateway(t testing.TB, opts Options) *testGateway {
	t.Helper()
	g := &testGateway{t: t, dir: t.TempDir()}
	if opts.Tokens == nil {
		g.keys = testKeys(t)
		opts.Tokens = g.keys
	} else {
		g.keys = opts.Tokens.(*Keys)
	}
	if opts.History == withoutHistory {
		opts.History = nil
	} else if opts.History == nil && opts.Cluster == nil {
		st, err := history.Open(filepath.Join(g.dir, "history.db"), history.Options{})
		if err != nil {
			t.Fatal(err)
		}
		g.store = st
		opts.History = st
	}
	if opts.HeartbeatInterval == 0 {
		opts.HeartbeatInterval = -1
	}
	if opts.RatePerSecond == 0 {
		opts.RatePerSecond = -1
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	g.opts = opts
	s, err := Start("127.0.0.1:0", opts)
	if err != nil {
		t.Fatal(err)
	}
	g.Server = s
	t.Cleanup(g.stop)
	return g
}

func (g *testGateway) stop() {
	g.Server.Close()
	if g.store != nil {
		g.store.Close()
	}
}

type tokenOpt func(*Claims)

func withName(n string) tokenOpt      { return func(c *Claims) { c.Name = n } }
func withKind(k string) tokenOpt      { return func(c *Claims) { c.Kind = k } }
func withTopics(t ...string) tokenOpt { return func(c *Claims) { c.Audience = t } }

func (g *testGateway) token(topic, id string, opts ...tokenOpt) string {
	g.t.Helper()
	c := Claims{Subject: id, Audience: Audience{topic}, ExpiresAt: time.Now().Add(time.Hour).Unix()}
	for _, o := range opts {
		o(&c)
	}
	tok, err := g.keys.Sign(c, AlgEdDSA)
	if err != nil {
		g.t.Fatal(err)
	}
	return tok
}

// client is a participant's WebSocket connection in a test.
type client struct {
	t    testing.TB
	id   string
	conn *websocket.Conn
}

// msg is a received envelope, decoded loosely so tests can see exactly
// which fields arrived.
type msg struct {
	raw           []byte
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
func (m *msg) field(key string) any {
	var p map[string]any
	json.Unmarshal(m.Payload, &p)
	return p[key]
}

func (m *msg) event() string {
	if e, ok := m.field("event").(string); ok {
		return e
	}
	e, _ := m.field("type").(string)
	return e
}

func (m *msg) presenceID() string {
	p, _ := m.field("participant").(map[string]any)
	id, _ := p["id"].(string)
	return id
}

func (m *msg) String() string { return string(m.raw) }

// dial connects id to topic with a fresh token and reads nothing.
func (g *testGateway) dial(topic, id string, opts ...tokenOpt) *client {
	g.t.Helper()
	return g.dialToken(id, topic, g.token(topic, id, opts...))
}

func (g *testGateway) dialToken(id, topic, token string) *client {
	g.t.Helper()
	return g.dialWith(id, topic, token, nil)
}

// dialSlow connects a client whose socket buffers bytes sparingly, to play a
// participant that stops reading.
func (g *testGateway) dialSlow(topic, id string) *client {
	g.t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: smallReceiveBuffer().DialContext}}
	return g.dialWith(id, topic, g.token(topic, id), hc)
}

func (g *testGateway) dialWith(id, topic, token string, hc *http.Client) *client {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(patience))
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
		g.t.Fatalf("dial %s as %s: %v%s", topic, id, err, body)
	}
	conn.SetReadLimit(64 << 20)
	c := &client{t: g.t, id: id, conn: conn}
	g.t.Cleanup(func() { conn.CloseNow() })
	return c
}

// join dials and consumes the welcome (and, in reference mode, the own join
// before it), returning the welcome.
func (g *testGateway) join(topic, id string, opts ...tokenOpt) (*client, *msg) {
	g.t.Helper()
	c := g.dial(topic, id, opts...)
	m := c.read()
	if g.opts.Compat == CompatReference {
		if m.Kind != mcpx.KindPresence || m.event() != mcpx.PresenceJoin || m.presenceID() != id {
			g.t.Fatalf("%s: first frame %s, want its own join", id, m)
		}
		m = c.read()
	}
	if m.Kind != mcpx.KindSystem || m.event() != "welcome" {
		g.t.Fatalf("%s: got %s, want the welcome", id, m)
	}
	return c, m
}

// patience bounds each wait of the harness (a frame, a dial, a write),
// scaled by testwait's knob: long, as it only bounds how long a failing
// test takes to say so.
const patience = 30 * time.Second

func (c *client) read() *msg {
	c.t.Helper()
	m, err := c.tryRead(patience)
	if err != nil {
		c.t.Fatalf("%s: read: %v", c.id, err)
	}
	return m
}

// tryRead reads the next frame within d (scaled by testwait's knob).
func (c *client) tryRead(d time.Duration) (*msg, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(d))
	defer cancel()
	typ, data, err := c.conn.Read(ctx)
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageText {
		return nil, fmt.Errorf("binary frame")
	}
	m := &msg{raw: data}
	if err := json.Unmarshal(data, m); err != nil {
		return nil, fmt.Errorf("frame %q is not an envelope: %v", data, err)
	}
	return m, nil
}

// readUntil reads until an envelope matching pred arrives.
func (c *client) readUntil(pred func(*msg) bool) *msg {
	c.t.Helper()
	for i := 0; i < 1000; i++ {
		m := c.read()
		if pred(m) {
			return m
		}
	}
	c.t.Fatalf("%s: nothing matched in 1000 frames", c.id)
	return nil
}

func (c *client) sendRaw(data string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(patience))
	defer cancel()
	if err := c.conn.Write(ctx, websocket.MessageText, []byte(data)); err != nil {
		c.t.Fatalf("%s: write: %v", c.id, err)
	}
}

func (c *client) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(string(b))
}

var envCounter atomic.Int64

// env builds an envelope from c; payload is JSON text.
func (c *client) env(to []string, payload string) map[string]any {
	e := map[string]any{
		"protocol": mcpx.Protocol,
		"id":       fmt.Sprintf("env-%s-%d", c.id, envCounter.Add(1)),
		"ts":       "2025-08-17T14:00:00Z",
		"from":     c.id,
		"kind":     mcpx.KindMCP,
		"payload":  json.RawMessage(payload),
	}
	if to != nil {
		e["to"] = to
	}
	return e
}

func (c *client) chat(text string) map[string]any {
	e := c.env(nil, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/chat/message","params":{"text":%q,"format":"plain"}}`, text))
	c.send(e)
	return e
}

// expectError reads the next frame and checks it is an error envelope with
// code, correlated with correlation.
func (c *client) expectError(code mcpx.Code, correlation string) *msg {
	c.t.Helper()
	m := c.read()
	if m.Kind != mcpx.KindSystem || m.From != mcpx.GatewayID || m.event() != "error" || m.field("type") != "error" ||
		m.field("code") != string(code) || m.CorrelationID != correlation || len(m.To) != 1 || m.To[0] != c.id {
		c.t.Fatalf("%s: got %s\nwant an error envelope, code %s, correlation_id %q, to [%s]", c.id, m, code, correlation, c.id)
	}
	if msg, _ := m.field("message").(string); msg == "" {
		c.t.Fatalf("%s: error envelope without a message: %s", c.id, m)
	}
	return m
}

// barrier proves that nothing else is pending for the given clients: from
// broadcasts a marker chat and each client's next frame must be it.
func barrier(t testing.TB, from *client, others ...*client) {
	t.Helper()
	e := from.chat("barrier")
	for _, c := range append([]*client{from}, others...) {
		m := c.read()
		if m.ID != e["id"] {
			t.Fatalf("%s: got %s before the barrier %s", c.id, m, e["id"])
		}
	}
}

// get performs a GET with an optional bearer token and decodes the JSON
// body into out (if non-nil). It fails the test unless the body is JSON.
func (g *testGateway) get(path, token string, out any) (int, http.Header) {
	g.t.Helper()
	req, _ := http.NewRequest("GET", g.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && path != "/metrics" {
		g.t.Fatalf("GET %s: %d with Content-Type %q: %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			g.t.Fatalf("GET %s: body %q: %v", path, body, err)
		}
	}
	return resp.StatusCode, resp.Header
}

// historyPage fetches a history page as viewer and returns the envelopes.
func (g *testGateway) historyPage(topic, viewer, query string) ([]msg, bool) {
	g.t.Helper()
	var body struct {
		History []json.RawMessage `json:"history"`
		HasMore bool              `json:"has_more"`
		Error   string            `json:"error"`
	}
	code, _ := g.get("/v0/topics/"+topic+"/history"+query, g.token(topic, viewer), &body)
	if code != 200 {
		g.t.Fatalf("history%s: %d %s", query, code, body.Error)
	}
	out := make([]msg, len(body.History))
	for i, raw := range body.History {
		out[i].raw = raw
		json.Unmarshal(raw, &out[i])
	}
	return out, body.HasMore
}

func ids(ms []msg) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

// dialStatus attempts a WebSocket upgrade and returns the HTTP status and
// JSON body of a refusal (0 if the upgrade succeeded).
func (g *testGateway) dialStatus(query string, header http.Header, subprotocols ...string) (int, map[string]any) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(patience))
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, g.WSURL+query, &websocket.DialOptions{HTTPHeader: header, Subprotocols: subprotocols})
	if err == nil {
		conn.CloseNow()
		return 0, nil
	}
	if resp == nil {
		g.t.Fatalf("dial %s: %v", query, err)
		return 0, nil
	}
	var body map[string]any
	b, _ := io.ReadAll(resp.Body)
	if jerr := json.Unmarshal(b, &body); jerr != nil {
		g.t.Fatalf("refusal of %s is not JSON: %d %q", query, resp.StatusCode, b)
	}
	return resp.StatusCode, body
}

func signEd(k *Keys, b []byte) []byte { return ed25519.Sign(k.ed, b) }

// withoutHistory in Options.History makes startGateway run a gateway with
// no history (a nil History would get the default temporary store).
var withoutHistory HistoryStore = &struct{ HistoryStore }{}
