package cep8

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// session is the gate's part of one client session: the payment
// interaction (CEP-8) its client asked for.
type session struct {
	g *Gate

	mu      sync.Mutex
	mode    string // the interaction asked for and granted: "" (transparent) or explicit gating
	refused string // an interaction asked for and not supported
}

// Session makes the gate's part of a new client session.
func (g *Gate) Session() contextvm.GateSession { return &session{g: g} }

// Learn reads the payment interaction a client asks for (CEP-8), on any
// of its messages: explicit gating if the server serves it, transparent
// otherwise; an unknown mode is remembered, to be refused.
func (s *session) Learn(tags nostr.Tags) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range tags {
		if len(t) < 2 || t[0] != contextvm.TagPaymentInteraction {
			continue
		}
		s.refused = ""
		switch {
		case t[1] == contextvm.PaymentTransparent:
			s.mode = ""
		case t[1] == contextvm.PaymentExplicitGating && !s.g.opts.NoExplicitGating:
			s.mode = contextvm.PaymentExplicitGating
		default:
			s.refused = t[1]
		}
	}
}

// Tags are the gate's pmi tags, and the explicit-gating tag for a client
// granted it.
func (s *session) Tags() nostr.Tags {
	tags := s.g.Tags()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mode == contextvm.PaymentExplicitGating {
		tags = append(tags, nostr.Tag{contextvm.TagPaymentInteraction, contextvm.PaymentExplicitGating})
	}
	return tags
}

// Admit takes a request of a client that asked for an interaction the
// server does not support, to refuse it, and a priced request, to collect
// its price before it runs.
func (s *session) Admit(call *contextvm.Call) bool {
	s.mu.Lock()
	mode, refusal := s.mode, s.refusalLocked()
	s.mu.Unlock()
	if refusal != nil {
		call.Go(func(ctx context.Context) { call.Answer(ctx, refusal) })
		return true
	}
	s.g.contact(call)
	if s.g.opts.Channels != nil && call.Request().Method == MethodChannelClose {
		s.g.closeChannel(call)
		return true
	}
	price, ok := s.g.priced(call.Request())
	if !ok {
		if _, _, paying := directPayment(call.Event().Tags, s.g.redeems); paying {
			// A payment for a request with no price (the client's price
			// list is out of date): said not taken before the answer.
			call.Go(func(ctx context.Context) {
				s.g.unusedDirect(ctx, call, "this request has no price")
				call.Run()
			})
			return true
		}
		return false
	}
	s.g.admit(call, mode == contextvm.PaymentExplicitGating, price)
	return true
}

// refusalLocked is the answer to a request of a client that asked for a
// payment interaction the server does not support, or nil; s.mu held.
func (s *session) refusalLocked() *jsonrpc.Error {
	if s.refused == "" {
		return nil
	}
	supported := []string{contextvm.PaymentTransparent}
	if !s.g.opts.NoExplicitGating {
		supported = append(supported, contextvm.PaymentExplicitGating)
	}
	data, _ := json.Marshal(map[string]any{"requested": s.refused, "supported": supported})
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unsupported payment_interaction %q", s.refused), Data: data}
}
