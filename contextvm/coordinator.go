package contextvm

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/durable"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A Coordinator makes a Server one replica of a group serving the same
// key (ServerOptions.Replicas; package contextvm/replica is one on NATS
// JetStream). Every replica receives every message event: the coordinator
// decides which one acts on each, records what this replica has in flight
// so that a survivor answers it if this one dies, keeps the group's record
// of each client's session, and takes over a lost member's clients and
// calls. A server without one acts on every message it receives.
//
// NewServer calls Join once, before any other method. Route is called on
// the server's router goroutine only, one message at a time, in the order
// the messages came; the other methods may be called at the same time,
// from any of the server's goroutines.
type Coordinator interface {
	// Join makes the server of h a member of the group: the coordinator
	// starts its work on h's goroutines (Host.Intake, Host.Go) and
	// returns the store the group shares, which is the server's State
	// when ServerOptions.State is nil. An error fails NewServer.
	Join(ctx context.Context, h *Host) (durable.Store, error)
	// Route takes one fresh message event. When this replica is to act
	// on it, Route claims it (Inbound.Claim) and proceeds
	// (Inbound.Proceed); otherwise it passes it by, or holds it until it
	// can tell. It may keep m, to act on it later on the router goroutine
	// (Host.OnRouter).
	Route(ctx context.Context, m *Inbound)
	// Assembled takes a message reassembled from CEP-22 fragments, whose
	// end frame Route let through: it proceeds with it (Inbound.Proceed
	// with a nil claim error), or refuses it (Inbound.Refuse).
	Assembled(ctx context.Context, m *Inbound)
	// Session starts, on this replica, the session of a client that sent
	// a request without having one here: through Host.StartSession, with
	// the client's initialize params when the group knows them (its
	// session lived on another replica), stateless otherwise.
	Session(ctx context.Context, client nostr.PubKey) (*ServerConn, *jsonrpc.Error)
	// Initialized records that client began a session on this replica
	// with an initialize of params and its discovery tags.
	Initialized(ctx context.Context, client nostr.PubKey, params json.RawMessage, tags nostr.Tags)
	// Answered is told that the answer to the message event id went out
	// (refusal: an answer the server gave without running it): no
	// survivor needs to answer it.
	Answered(ctx context.Context, id nostr.ID, refusal bool)
	// Lead runs f while this replica is the one that announces the
	// group's server (CEP-6), each time it becomes it, until ctx ends.
	Lead(ctx context.Context, f func(context.Context))
}

// transferOrphans is a Coordinator whose replicas can receive the start of
// a fragmented message and its end on different members: it says why an
// end frame came without a start, for the client.
type transferOrphans interface {
	MissingStart() string
}

// solo is the Coordinator of a server that is no replica: it acts on every
// message it receives.
type solo struct{ h *Host }

func (solo) Join(context.Context, *Host) (durable.Store, error) { return nil, nil }
func (solo) Route(ctx context.Context, m *Inbound)              { m.Proceed(ctx, m.Claim(ctx)) }
func (solo) Assembled(ctx context.Context, m *Inbound)          { m.Proceed(ctx, nil) }
func (o solo) Session(_ context.Context, client nostr.PubKey) (*ServerConn, *jsonrpc.Error) {
	return o.h.StartSession(client, nil, nil)
}
func (solo) Initialized(context.Context, nostr.PubKey, json.RawMessage, nostr.Tags) {}
func (solo) Answered(context.Context, nostr.ID, bool)                               {}
func (solo) Lead(ctx context.Context, f func(context.Context))                      { f(ctx) }

// An Inbound is one message event on its way from the relays to its
// session: unwrapped, verified and fresh. Its Coordinator decides whether
// this server acts on it.
type Inbound struct {
	s    *Server
	evt  nostr.Event // the message event, inside its wrap
	wrap nostr.Kind  // the wrap it came in, 0 for plaintext
}

// ID is the message event's id.
func (m *Inbound) ID() nostr.ID { return m.evt.ID }

// Client is the message event's author.
func (m *Inbound) Client() nostr.PubKey { return m.evt.PubKey }

// Content is the message event's content: a JSON-RPC message or batch.
func (m *Inbound) Content() string { return m.evt.Content }

// Wrap is the kind of gift wrap the message came in, 0 for plaintext.
func (m *Inbound) Wrap() nostr.Kind { return m.wrap }

// Fresh fails with ErrStale once the message has left the server's
// freshness window: a message held for a while is checked again.
func (m *Inbound) Fresh() error { return fresh(m.s.window, m.evt.CreatedAt, time.Now()) }

// Claim records, in the server's State, that the message is being acted
// on: it fails with ErrReplay when it was before (by this server, before
// a restart, or by another replica sharing the State), with durable.ErrFull
// when the State holds too many fresh ids to take another, or with the
// State's own error.
func (m *Inbound) Claim(ctx context.Context) error { return m.s.claimExecution(ctx, m.evt) }

// Proceed acts on the message as claim, the error of its Claim, says:
// nil runs it (its requests go to their sessions); ErrReplay answers a
// replay of a request the server keeps the answer of (ServerOptions.Gate)
// and drops the rest; any other error refuses its requests.
func (m *Inbound) Proceed(ctx context.Context, claim error) {
	s, inner := m.s, m.evt
	switch {
	case claim == nil:
		s.dispatch(ctx, inner, m.wrap)
	case errors.Is(claim, ErrReplay):
		s.log.Debug("dropping message", "id", inner.ID.Hex(), "client", inner.PubKey.Hex(), "err", claim)
		if g := s.gate; g != nil {
			wrap := m.wrap
			s.life.Go(func(ctx context.Context) { g.Replayed(ctx, inner, wrap) })
		}
	case errors.Is(claim, durable.ErrFull):
		s.log.Warn("refusing a message: the store of executed requests is full", "id", inner.ID.Hex(), "client", inner.PubKey.Hex())
		s.refuseEvent(inner, m.wrap, &jsonrpc.Error{Code: CodeServerBusy,
			Message: "server busy: it remembers too many recent requests to take another without risking running one twice; retry later"})
	default:
		s.log.Error("refusing a message: its execution could not be recorded", "id", inner.ID.Hex(), "err", claim)
		s.refuseEvent(inner, m.wrap, &jsonrpc.Error{Code: CodeTransportError,
			Message: "the server could not record the request, so it did not run it; retry later"})
	}
}

// Refuse answers every request the message carries with refusal, and runs
// none of them.
func (m *Inbound) Refuse(refusal *jsonrpc.Error) { m.s.refuseEvent(m.evt, m.wrap, refusal) }
