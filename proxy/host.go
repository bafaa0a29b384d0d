package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// askIDPrefix starts the ids of the proxy's own requests to the host, so
// that their answers are told apart from those the server awaits.
const askIDPrefix = "cvm-pay-"

// Host is the proxy's side of the MCP host: it learns, from the host's
// initialize request, whether the host takes elicitation (in form mode),
// and asks it to approve payments that way (PipeHost). Confirm is a
// cep8.PayOptions.Confirm: a host that takes no elicitation approves
// every payment the budget allows (the per-call cap, which no payment goes
// without, and the daily limits).
type Host struct {
	mu      sync.Mutex
	local   mcp.Connection // nil until PipeHost runs
	elicits bool
	next    int64
	waiting map[string]chan *jsonrpc.Response
	done    chan struct{} // closed when the pipe ends
}

// NewHost returns a Host not yet connected to its pipe.
func NewHost() *Host {
	return &Host{waiting: map[string]chan *jsonrpc.Response{}, done: make(chan struct{})}
}

// Elicits reports whether the host said it takes form elicitation.
func (h *Host) Elicits() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.elicits
}

// Confirm asks the host to approve the payment of o, through elicitation
// (elicitation/create in form mode, with nothing to fill in: accept pays,
// decline or cancel does not). A host that takes no elicitation is not
// asked: the payment is approved, within the budget. An error, the end of
// ctx or of the pipe is a refusal.
func (h *Host) Confirm(ctx context.Context, o contextvm.PaymentOffer) bool {
	h.mu.Lock()
	if !h.elicits || h.local == nil {
		h.mu.Unlock()
		return true
	}
	h.next++
	id := askIDPrefix + strconv.FormatInt(h.next, 10)
	answer := make(chan *jsonrpc.Response, 1)
	h.waiting[id] = answer
	local := h.local
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.waiting, id)
		h.mu.Unlock()
	}()

	what := o.Capability
	if what == "" {
		what = o.Method
	}
	server := o.Server
	if pk, err := nostrx.ParsePublicKey(server); err == nil {
		server = nostrx.EncodeNpub(pk.Key)
	}
	params, err := json.Marshal(map[string]any{
		"mode": "form",
		"message": fmt.Sprintf("Pay %d %s to %s for %s (%s)? The ContextVM server asks this payment before it runs the request.",
			o.Amount, o.Unit, server, what, o.PMI),
		"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{}},
		"_meta": map[string]any{"cvm/payment": map[string]any{"amount": o.Amount, "unit": o.Unit, "server": o.Server,
			"capability": o.Capability, "pmi": o.PMI, "description": o.Description}},
	})
	if err != nil {
		return false
	}
	if err := local.Write(ctx, &jsonrpc.Request{ID: mcpmsg.StringID(id), Method: "elicitation/create", Params: params}); err != nil {
		return false
	}
	select {
	case resp := <-answer:
		if resp.Error != nil {
			return false
		}
		var res struct {
			Action string `json:"action"`
		}
		return json.Unmarshal(resp.Result, &res) == nil && res.Action == "accept"
	case <-ctx.Done():
		return false
	case <-h.done:
		return false
	}
}

// fromHost looks at a message from the host before it goes on: it learns
// the host's capabilities from initialize, and takes the answers to its own
// requests, which go no further (taken reports it).
func (h *Host) fromHost(msg jsonrpc.Message) (taken bool) {
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if m.Method == mcpmsg.MethodInitialize && m.IsCall() {
			var p struct {
				Capabilities struct {
					Elicitation *struct {
						Form *struct{}       `json:"form"`
						URL  json.RawMessage `json:"url"`
					} `json:"elicitation"`
				} `json:"capabilities"`
			}
			json.Unmarshal(m.Params, &p)
			e := p.Capabilities.Elicitation
			h.mu.Lock()
			// {} means form (before 2025-11-25 there was no other mode).
			h.elicits = e != nil && (e.Form != nil || e.URL == nil)
			h.mu.Unlock()
		}
	case *jsonrpc.Response:
		id, ok := m.ID.Raw().(string)
		if !ok || !strings.HasPrefix(id, askIDPrefix) {
			return false
		}
		h.mu.Lock()
		answer, ok := h.waiting[id]
		h.mu.Unlock()
		if ok {
			select {
			case answer <- m:
			default: // a second answer to one question
			}
		}
		return ok
	}
	return false
}
