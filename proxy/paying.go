package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/cvmgo/cvm/payments/quotation"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A PayingConn is a connection to an MCP streamable HTTP server that
// prices tools with NIP-10 quotations (package quotation), for a proxy
// between an MCP host and that server: it learns the priced tools from the
// tools/list answers that pass, and sends a host's call of one only once
// its quotation is bought (quote, pay within the budget, confirm), naming
// it in _meta. Buying runs beside the pipe, since the host may be asked
// to approve the payment (elicitation) through that same pipe; a call
// that is not paid is answered with the refusal instead (a
// contextvm.CodePaymentDeclined error).
//
// Read and Write may be called concurrently, as the go-sdk's connections;
// Close ends the buying in flight and waits for it.
type PayingConn struct {
	mcp.Connection
	buyer *quotation.Buyer

	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	local  chan jsonrpc.Message // answers made here, for the host
	remote chan readResult      // what the server sent

	mu     sync.Mutex
	lists  map[jsonrpc.ID]bool // tools/list requests in flight
	priced map[string]bool
	calls  map[jsonrpc.ID]*jsonrpc.Request // unpaid tools/calls in flight
}

// readResult is one Read of the wrapped connection.
type readResult struct {
	msg jsonrpc.Message
	err error
}

// NewPayingConn wraps c, which reaches the server, to buy the quotations
// of priced calls with b. It reads c on a goroutine of its own until
// Close. When b pays by channel (b.ByChannel), c must send through
// b.Transport, which pays priced calls by receipt: a call is then bought
// a quotation only when the server asks for one all the same.
func NewPayingConn(c mcp.Connection, b *quotation.Buyer) *PayingConn {
	ctx, cancel := context.WithCancel(context.Background())
	p := &PayingConn{Connection: c, buyer: b, ctx: ctx, cancel: cancel,
		local: make(chan jsonrpc.Message, 16), remote: make(chan readResult),
		lists: map[jsonrpc.ID]bool{}, priced: map[string]bool{}, calls: map[jsonrpc.ID]*jsonrpc.Request{}}
	p.wg.Go(func() {
		for {
			msg, err := c.Read(ctx)
			select {
			case p.remote <- readResult{msg, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	})
	return p
}

func (p *PayingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-p.local:
		return m, nil
	case r := <-p.remote:
		resp, ok := r.msg.(*jsonrpc.Response)
		if !ok || r.err != nil {
			return r.msg, r.err
		}
		p.learn(resp)
		p.mu.Lock()
		call := p.calls[resp.ID]
		delete(p.calls, resp.ID)
		p.mu.Unlock()
		if call != nil && quotation.IsRequired(resp.Error) {
			// Priced, though no tools/list said so (the host did not
			// list, or the price is new): buy, and send it again.
			var params struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			}
			json.Unmarshal(call.Params, &params)
			p.mu.Lock()
			p.priced[params.Name] = true
			p.mu.Unlock()
			p.wg.Go(func() { p.buyAndSend(call, params.Name, params.Arguments) })
			return p.Read(ctx)
		}
		return r.msg, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.ctx.Done():
		return nil, errors.New("connection closed")
	}
}

// learn reads the prices of a tools/list answer.
func (p *PayingConn) learn(resp *jsonrpc.Response) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.lists[resp.ID] {
		return
	}
	delete(p.lists, resp.ID)
	var res mcp.ListToolsResult
	if resp.Error != nil || json.Unmarshal(resp.Result, &res) != nil {
		return
	}
	for _, t := range res.Tools {
		p.priced[t.Name] = quotation.Priced(t)
	}
	p.buyer.Learn(res.Tools)
}

func (p *PayingConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() {
		return p.Connection.Write(ctx, msg)
	}
	switch req.Method {
	case "server/discover":
		// The go-sdk client's probe for the 2026 protocol, which a
		// session-based server answers only inside a session: answered
		// here as the ContextVM client transport does, so that the host
		// goes on to initialize.
		p.answer(req.ID, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "server/discover is not served; initialize"})
		return nil
	case "tools/list":
		p.mu.Lock()
		p.lists[req.ID] = true
		p.mu.Unlock()
	case "tools/call":
		var params struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		json.Unmarshal(req.Params, &params)
		p.mu.Lock()
		priced := p.priced[params.Name]
		p.mu.Unlock()
		if priced && !p.buyer.ByChannel() {
			p.wg.Go(func() { p.buyAndSend(req, params.Name, params.Arguments) })
			return nil
		}
		p.mu.Lock()
		p.calls[req.ID] = req
		p.mu.Unlock()
	}
	if err := p.Connection.Write(ctx, msg); err != nil {
		// Answered, so that the host does not wait for it.
		p.answer(req.ID, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()})
	}
	return nil
}

// answer gives the host an answer made here.
func (p *PayingConn) answer(id jsonrpc.ID, e *jsonrpc.Error) {
	select {
	case p.local <- &jsonrpc.Response{ID: id, Error: e}:
	case <-p.ctx.Done():
	}
}

// buyAndSend buys the call's quotation and sends the call naming it, or
// answers the host with why it was not paid.
func (p *PayingConn) buyAndSend(req *jsonrpc.Request, name string, args json.RawMessage) {
	var a any
	if len(args) > 0 {
		json.Unmarshal(args, &a)
	}
	id, err := p.buyer.Buy(p.ctx, name, a)
	if err == nil {
		fwd := *req
		fwd.Params = mcpmsg.SetMeta(req.Params, quotation.MetaQuotation, id)
		if err = p.Connection.Write(p.ctx, &fwd); err == nil {
			return
		}
	}
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		werr = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	p.answer(req.ID, werr)
}

func (p *PayingConn) Close() error {
	p.cancel()
	err := p.Connection.Close()
	p.wg.Wait()
	return err
}
