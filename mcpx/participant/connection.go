package participant

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/mcpx"
)

// welcomeTimeout bounds the wait for the welcome after the upgrade; the
// gateway sends it at once.
const welcomeTimeout = 15 * time.Second

// clientReadLimit is the largest frame the client reads. The gateway's own
// limit is 1 MiB per envelope by default; a reference-mode welcome carries
// a history tail and can be larger.
const clientReadLimit = 32 << 20

// connState is a connection that has been welcomed.
type connState struct {
	conn      *websocket.Conn
	ep        int // the gateway, an index in Client.eps
	token     string
	self      mcpx.Participant
	others    []mcpx.Participant
	history   bool
	latest    uint64 // the topic's newest seq when we joined
	hasLatest bool
	pageLimit int
	early     [][]byte // frames before the welcome (reference compat sends our own join first)
}

// dial connects to gateway ep and reads up to the welcome.
func (c *Client) dial(ctx context.Context, ep int) (*connState, error) {
	wsURL := c.eps[ep].ws
	tok, err := c.bearer(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, welcomeTimeout)
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{
		HTTPClient:      c.opts.HTTPClient,
		HTTPHeader:      http.Header{"Authorization": {"Bearer " + tok}},
		Subprotocols:    []string{mcpx.Subprotocol},
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			return nil, httpRefusal("connect to "+wsURL, resp.StatusCode, body)
		}
		return nil, fmt.Errorf("mcpx: connect to %s: %w", wsURL, err)
	}
	conn.SetReadLimit(clientReadLimit)
	cs := &connState{conn: conn, ep: ep, token: tok}
	for range 64 {
		_, data, err := conn.Read(ctx)
		if err != nil {
			conn.CloseNow()
			return nil, fmt.Errorf("mcpx: waiting for the welcome: %w", err)
		}
		e, err := mcpx.DecodeDelivered(data)
		if err == nil && e.Kind == mcpx.KindSystem && e.From == mcpx.GatewayID && parseWelcome(e.Payload, cs) {
			return cs, nil
		}
		cs.early = append(cs.early, data)
	}
	conn.CloseNow()
	return nil, errors.New("mcpx: the gateway sent no welcome")
}

// parseWelcome reads either welcome shape (docs/mcpx.md, decision 1): the
// spec's (event, participant, history{enabled,limit,latest_seq}) or the
// reference gateway's (type, participant_id, history[]).
func parseWelcome(payload json.RawMessage, cs *connState) bool {
	var w struct {
		Event         string             `json:"event"`
		Type          string             `json:"type"`
		Participant   *mcpx.Participant  `json:"participant"`
		ParticipantID string             `json:"participant_id"`
		Participants  []mcpx.Participant `json:"participants"`
		History       json.RawMessage    `json:"history"`
	}
	if json.Unmarshal(payload, &w) != nil || (w.Event != "welcome" && w.Type != "welcome") {
		return false
	}
	switch {
	case w.Participant != nil && w.Participant.ID != "":
		cs.self = *w.Participant
	case w.ParticipantID != "":
		cs.self = mcpx.Participant{ID: w.ParticipantID, Name: w.ParticipantID}
	default:
		return false
	}
	for _, p := range w.Participants {
		if p.ID != "" && p.ID != cs.self.ID {
			cs.others = append(cs.others, p)
		}
	}
	var h struct {
		Enabled   bool    `json:"enabled"`
		Limit     int     `json:"limit"`
		LatestSeq *uint64 `json:"latest_seq"`
	}
	if json.Unmarshal(w.History, &h) == nil && h.Enabled {
		cs.history, cs.pageLimit = true, h.Limit
		if h.LatestSeq != nil {
			cs.latest, cs.hasLatest = *h.LatestSeq, true
		}
	}
	return true
}

// run owns the connection: it serves cs, then reconnects with backoff until
// the client closes. started receives the outcome of the first connection.
//
// A reconnect tries the gateway it lost first (a blip, a restart), then the
// next ones in turn; the backoff doubles after each round of the list that
// all failed, so a dead node costs one failed dial, not a growing wait.
func (c *Client) run(cs *connState, started chan<- error) {
	defer c.wg.Done()
	backoff := c.opts.ReconnectMin
	for {
		err := c.serve(cs, started)
		started = nil
		// Close closes the connection before it cancels the context, so a
		// read that failed because we are leaving can get here first: that
		// is no disconnection to report.
		if c.ctx.Err() != nil || c.isClosed() {
			return
		}
		c.log.Info("disconnected from the gateway; reconnecting", "gateway", c.eps[cs.ep].ws, "err", err)
		c.emit(Event{Type: EventDisconnected, Err: err})
		lost := cs.ep
		next := lost
		for {
			wait := backoff/2 + rand.N(backoff/2+1) // jitter: not every participant at once
			select {
			case <-time.After(wait):
			case <-c.ctx.Done():
				return
			}
			cs, err = c.dial(c.ctx, next)
			if err == nil {
				backoff = c.opts.ReconnectMin
				if next != lost {
					c.log.Info("moved to another gateway", "gateway", c.eps[next].ws)
				}
				break
			}
			if c.ctx.Err() != nil {
				return
			}
			c.log.Info("reconnect failed", "gateway", c.eps[next].ws, "err", err)
			next = (next + 1) % len(c.eps)
			if next == lost {
				backoff = min(backoff*2, c.opts.ReconnectMax)
			}
		}
	}
}

// serve resumes on a welcomed connection and reads it until it fails.
func (c *Client) serve(cs *connState, started chan<- error) error {
	defer cs.conn.CloseNow()
	c.mu.Lock()
	c.gen++
	gen := c.gen
	first := gen == 1
	c.cur = cs.ep
	c.token, c.self, c.history = cs.token, cs.self, cs.history
	c.pageLimit = min(max(cs.pageLimit, 1), 1000)
	if !cs.history {
		c.pageLimit = 0
	}
	old := c.roster
	c.roster = make(map[string]mcpx.Participant, len(cs.others))
	for _, p := range cs.others {
		c.roster[p.ID] = p
	}
	// A participant we meet again may have reconnected while we were
	// away, and a new connection means a new MCP session (decision 13):
	// every handshake is done again, lazily.
	for _, ps := range c.peers {
		ps.invalidate()
	}
	resumeFrom := c.lastSeq
	c.mu.Unlock()

	c.emit(Event{Type: EventConnected, Participant: cs.self, Participants: cs.others})
	if !first {
		for id, p := range old {
			if _, ok := c.roster[id]; !ok {
				c.peerAbsent(id)
				c.emit(Event{Type: EventLeave, Participant: p, Replayed: true})
			}
		}
		for id, p := range c.roster {
			if _, ok := old[id]; !ok {
				c.emit(Event{Type: EventJoin, Participant: p, Replayed: true})
			}
		}
	}

	switch {
	case first || !cs.history || !cs.hasLatest:
		c.setLastSeq(cs.latest)
	case cs.latest < resumeFrom:
		c.log.Warn("the topic's history restarted below what this client had seen; envelopes in between cannot be recovered",
			"seen", resumeFrom, "latest", cs.latest)
		c.setLastSeq(cs.latest)
	default:
		if err := c.catchUp(cs, resumeFrom); err != nil {
			if started != nil {
				started <- err
			}
			return err
		}
	}
	for _, data := range cs.early {
		c.handleFrame(data, false)
	}
	c.resendUnconfirmed(cs.conn, gen)

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		if started != nil {
			started <- errConnClosed
		}
		return errConnClosed
	}
	c.conn = cs.conn
	close(c.ready)
	c.mu.Unlock()
	if started != nil {
		started <- nil
	}
	c.log.Debug("connected", "participant", cs.self.ID, "generation", gen)

	pctx, stopPing := context.WithCancel(c.ctx)
	pingDone := make(chan struct{})
	go func() {
		defer close(pingDone)
		c.pinger(pctx, cs.conn, gen)
	}()
	err := c.readLoop(cs.conn)
	stopPing()
	<-pingDone

	c.mu.Lock()
	c.conn = nil
	c.ready = make(chan struct{})
	c.mu.Unlock()
	return err
}

func (c *Client) setLastSeq(seq uint64) {
	c.mu.Lock()
	c.lastSeq = seq
	c.mu.Unlock()
}

func (c *Client) readLoop(conn *websocket.Conn) error {
	for {
		typ, data, err := conn.Read(c.ctx)
		if err != nil {
			return err
		}
		if typ == websocket.MessageText {
			c.handleFrame(data, false)
		}
	}
}

// catchUp reads, oldest first, every envelope published after seq from
// while this participant was away, exactly as if it had arrived live.
// Live frames are not read meanwhile; the ones the gateway queued are
// deduplicated by seq when reading resumes.
func (c *Client) catchUp(cs *connState, from uint64) error {
	ctx, cancel := context.WithTimeout(c.ctx, 2*time.Minute)
	defer cancel()
	after := from
	for after < cs.latest {
		raws, more, err := c.historyPage(ctx, cs.token, HistoryQuery{After: fmt.Sprint(after), Limit: c.pageLimit})
		if err != nil {
			return fmt.Errorf("mcpx: resuming from history after seq %d: %w", after, err)
		}
		if len(raws) == 0 {
			break
		}
		for i := len(raws) - 1; i >= 0; i-- {
			e, err := mcpx.DecodeDelivered(raws[i])
			if err != nil {
				continue
			}
			if e.Seq > after {
				after = e.Seq
			}
			c.handleFrame(raws[i], true)
		}
		if !more {
			break
		}
	}
	c.mu.Lock()
	if c.lastSeq < cs.latest {
		c.lastSeq = cs.latest // directed envelopes to others leave gaps we may not read
	}
	c.mu.Unlock()
	return nil
}
