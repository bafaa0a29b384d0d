package participant

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// peerState is this participant's MCP client session with one peer: the
// handshake's result, shared by every local caller (the seed's PATTERNS §2:
// one handshake per peer, deduplicated, backed off after failure).
type peerState struct {
	result   json.RawMessage // the initialize result; nil until a handshake succeeds
	running  chan struct{}   // closed when the handshake in flight ends
	err      error           // the last failure
	failures int
	retryAt  time.Time
	gen      int // bumped by invalidate, so a handshake that outlived its peer's connection is not kept
}

// invalidate forgets the handshake: the peer has a new connection, and a
// new connection is a new MCP session (docs/mcpx.md, decision 13). It also
// clears the backoff: a peer that came back deserves a fresh try.
func (ps *peerState) invalidate() {
	ps.result, ps.err, ps.failures, ps.retryAt = nil, nil, 0, time.Time{}
	ps.gen++
}

// Initialize performs the MCP handshake with peer, if it has not been done
// since the peer (or this participant) last connected, and returns the
// peer's initialize result.
func (c *Client) Initialize(ctx context.Context, peer string) (*mcp.InitializeResult, error) {
	raw, err := c.ensure(ctx, peer, nil)
	if err != nil {
		return nil, err
	}
	var res mcp.InitializeResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("mcpx: %s's initialize result: %w", peer, err)
	}
	return &res, nil
}

// ensure returns the initialize result of peer, performing the handshake
// with params (nil: the client's own) if needed. Concurrent callers share
// one handshake; after a failure, callers get ErrHandshakeBackoff until the
// backoff has passed.
func (c *Client) ensure(ctx context.Context, peer string, params json.RawMessage) (json.RawMessage, error) {
	for {
		c.mu.Lock()
		ps := c.peers[peer]
		if ps == nil {
			ps = &peerState{}
			c.peers[peer] = ps
		}
		if ps.result != nil {
			res := ps.result
			c.mu.Unlock()
			return res, nil
		}
		if ch := ps.running; ch != nil {
			c.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if now := time.Now(); now.Before(ps.retryAt) {
			err := ps.err
			wait := ps.retryAt.Sub(now).Round(time.Millisecond)
			c.mu.Unlock()
			return nil, fmt.Errorf("%w (%s; next attempt in %s): %w", ErrHandshakeBackoff, peer, wait, err)
		}
		ch := make(chan struct{})
		ps.running = ch
		gen := ps.gen
		c.mu.Unlock()

		res, err := c.handshake(ctx, peer, params)

		c.mu.Lock()
		if ps.gen == gen {
			switch {
			case err == nil:
				ps.result, ps.failures = res, 0
			case ctx.Err() == nil:
				// The caller did not give up: the peer failed. Back off.
				ps.failures++
				ps.err = err
				d := c.opts.HandshakeRetryMin << min(ps.failures-1, 16)
				ps.retryAt = time.Now().Add(min(d, c.opts.HandshakeRetryMax))
			}
		}
		ps.running = nil
		close(ch)
		c.mu.Unlock()
		return res, err
	}
}

// handshake is initialize, its result, then notifications/initialized.
func (c *Client) handshake(ctx context.Context, peer string, params json.RawMessage) (json.RawMessage, error) {
	if params == nil {
		var err error
		params, err = mcpmsg.Marshal(&mcp.InitializeParams{
			ProtocolVersion: c.opts.ProtocolVersion,
			ClientInfo:      c.opts.ClientInfo,
			Capabilities:    c.opts.Capabilities,
		})
		if err != nil {
			return nil, err
		}
	}
	res, err := c.Call(ctx, peer, mcpmsg.MethodInitialize, params)
	if err != nil {
		return nil, fmt.Errorf("mcpx: handshake with %s: %w", peer, err)
	}
	var check struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if json.Unmarshal(res, &check) != nil || check.ProtocolVersion == "" {
		return nil, fmt.Errorf("mcpx: handshake with %s: the initialize result has no protocolVersion: %.200s", peer, res)
	}
	payload, err := encodeRPC(&jsonrpc.Request{Method: mcpmsg.MethodInitialized})
	if err != nil {
		return nil, err
	}
	if err := c.send(ctx, c.envelope([]string{peer}, payload, "")); err != nil {
		return nil, fmt.Errorf("mcpx: handshake with %s: %w", peer, err)
	}
	return res, nil
}
