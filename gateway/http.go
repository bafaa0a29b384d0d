package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTP is an Upstream that reaches a streamable-HTTP MCP server; every
// upstream session is an HTTP session (Mcp-Session-Id) of its own.
//
// The go-sdk's streamable client connection carries the POSTs and their
// answers. Two things it does only when an mcp.Client drives it, through an
// unexported hook, are done here instead: once the session is initialized,
// each request carries the negotiated Mcp-Protocol-Version, and a GET
// stream receives what the server sends outside any request (list_changed,
// resource updates).
type HTTP struct {
	URL string
	// Client makes the requests (default http.DefaultClient).
	Client *http.Client
}

// Open starts an HTTP session. Nothing is sent until the gateway's
// initialize.
func (h *HTTP) Open(ctx context.Context) (mcp.Connection, error) {
	base := h.Client
	if base == nil {
		base = http.DefaultClient
	}
	cctx, cancel := context.WithCancel(context.Background())
	c := &httpConn{
		url:    h.URL,
		ctx:    cctx,
		cancel: cancel,
		in:     make(chan jsonrpc.Message, 16),
		failed: make(chan struct{}),
	}
	client := *base
	rt := client.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	client.Transport = versionHeader{base: rt, c: c}
	c.client = &client
	inner, err := (&mcp.StreamableClientTransport{Endpoint: h.URL, HTTPClient: &client}).Connect(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("connect %s: %w", h.URL, err)
	}
	c.inner = inner
	c.wg.Go(c.pump)
	return c, nil
}

// httpConn is an upstream HTTP session.
type httpConn struct {
	url    string
	client *http.Client
	inner  mcp.Connection
	ctx    context.Context // the life of the session; requests and streams are bound to it
	cancel context.CancelFunc
	in     chan jsonrpc.Message
	wg     sync.WaitGroup

	failOnce sync.Once
	failErr  error
	failed   chan struct{}

	mu          sync.Mutex
	initID      jsonrpc.ID // the initialize request, to catch its answer
	version     string     // negotiated protocol version
	listening   bool       // the GET stream was started
	closeOnce   sync.Once
	closeResult error
}

func (c *httpConn) SessionID() string { return c.inner.SessionID() }

// pump moves what the POST streams deliver into in.
func (c *httpConn) pump() {
	for {
		msg, err := c.inner.Read(c.ctx)
		if err != nil {
			c.fail(err)
			return
		}
		c.deliver(msg)
	}
}

func (c *httpConn) deliver(msg jsonrpc.Message) {
	if r, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		if r.ID == c.initID && r.Result != nil {
			var res struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			json.Unmarshal(r.Result, &res)
			c.version = res.ProtocolVersion
		}
		c.mu.Unlock()
	}
	select {
	case c.in <- msg:
	case <-c.ctx.Done():
	}
}

func (c *httpConn) fail(err error) {
	c.failOnce.Do(func() {
		c.failErr = err
		close(c.failed)
	})
}

func (c *httpConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case msg := <-c.in:
		return msg, nil
	case <-c.failed:
		// What was already delivered comes first.
		select {
		case msg := <-c.in:
			return msg, nil
		default:
		}
		if c.ctx.Err() != nil {
			return nil, io.EOF
		}
		return nil, c.failErr
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write sends msg. The session's context, not the caller's, carries the
// request: the answer to a call may stream in long after Write returns.
func (c *httpConn) Write(_ context.Context, msg jsonrpc.Message) error {
	r, isReq := msg.(*jsonrpc.Request)
	if isReq && r.Method == "initialize" {
		c.mu.Lock()
		c.initID = r.ID
		c.mu.Unlock()
	}
	if err := c.inner.Write(c.ctx, msg); err != nil {
		return err
	}
	if isReq && r.Method == "notifications/initialized" {
		c.mu.Lock()
		start := !c.listening && c.version != ""
		c.listening = true
		c.mu.Unlock()
		if start {
			c.wg.Go(c.listen)
		}
	}
	return nil
}

func (c *httpConn) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.closeResult = c.inner.Close()
		c.wg.Wait()
	})
	return c.closeResult
}

// listenRetries bounds how often a GET stream that keeps failing is opened
// again; the POST streams work without it.
const listenRetries = 5

// listen keeps a GET stream open for messages the server sends outside any
// request, reconnecting after a drop (with Last-Event-ID, so a server that
// keeps events resumes where it left off).
func (c *httpConn) listen() {
	lastID := ""
	delay, failures := 250*time.Millisecond, 0
	for {
		done, err := c.stream(&lastID)
		if done || c.ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			if failures == listenRetries {
				return
			}
			delay *= 2
		} else {
			failures, delay = 0, 250*time.Millisecond
		}
		select {
		case <-time.After(delay):
		case <-c.ctx.Done():
			return
		}
	}
}

// stream reads one GET stream to its end. done means there is no stream to
// be had (the server offers none, or the session is gone).
func (c *httpConn) stream(lastID *string) (done bool, err error) {
	req, err := http.NewRequestWithContext(c.ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return true, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if id := c.inner.SessionID(); id != "" {
		req.Header.Set("Mcp-Session-Id", id)
	}
	if *lastID != "" {
		req.Header.Set("Last-Event-ID", *lastID)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		// The server forgot the session: this connection is over.
		c.fail(fmt.Errorf("HTTP session gone (GET %s: %s)", c.url, resp.Status))
		return true, nil
	case resp.StatusCode >= 400:
		return true, nil // 405 and the like: no stream offered
	case !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"):
		return true, nil
	}
	return false, readEvents(resp.Body, lastID, c.deliver)
}

// readEvents parses a server-sent event stream, handing each JSON-RPC
// message to deliver.
func readEvents(r io.Reader, lastID *string, deliver func(jsonrpc.Message)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var data strings.Builder
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if data.Len() > 0 && (event == "" || event == "message") {
				if msg, err := jsonrpc.DecodeMessage([]byte(data.String())); err == nil {
					deliver(msg)
				}
			}
			data.Reset()
			event = ""
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(value)
		case "event":
			event = value
		case "id":
			*lastID = value
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// versionHeader adds the negotiated Mcp-Protocol-Version to every request
// after initialize; servers that check it reject requests without it.
type versionHeader struct {
	base http.RoundTripper
	c    *httpConn
}

func (v versionHeader) RoundTrip(req *http.Request) (*http.Response, error) {
	v.c.mu.Lock()
	version := v.c.version
	v.c.mu.Unlock()
	if version != "" && req.Header.Get("Mcp-Protocol-Version") == "" {
		req = req.Clone(req.Context())
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	return v.base.RoundTrip(req)
}
