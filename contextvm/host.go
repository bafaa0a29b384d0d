package contextvm

import (
	"context"
	"log/slog"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/durable"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A Host is what a Server lends the features plugged into it: its
// Coordinator (ServerOptions.Replicas) and its Gate (ServerOptions.Gate),
// which NewServer hands it to. Its methods are safe for concurrent use;
// after the server has closed, what they would publish or start is not.
type Host struct{ s *Server }

// PublicKey is the server's identity.
func (h *Host) PublicKey() nostr.PubKey { return h.s.me }

// Logger is the server's logger.
func (h *Host) Logger() *slog.Logger { return h.s.log }

// State is the server's store (ServerOptions.State, or its Coordinator's):
// set once the Coordinator has joined.
func (h *Host) State() durable.Store { return h.s.opts.State }

// Freshness is the server's freshness window: a message event older (or
// newer) than this is dropped, so what is kept to answer its replays may
// be forgotten once it has left it.
func (h *Host) Freshness() time.Duration { return h.s.window }

// Prices are the prices the server advertises (ServerOptions.Prices).
func (h *Host) Prices() []Price { return h.s.opts.Prices }

// Sessions is the number of client sessions the server has.
func (h *Host) Sessions() int { return h.s.sessions.len() }

// Coordinator is the server's Coordinator, nil for a server that is no
// replica.
func (h *Host) Coordinator() Coordinator { return h.s.opts.Replicas }

// Intake runs f on a goroutine of the server's intake, which Close ends
// first, before the sessions answer what they have in flight. It reports
// false, and runs nothing, once the server is closing.
func (h *Host) Intake(f func(ctx context.Context)) bool { return h.s.intake.Go(f) }

// Go runs f on a goroutine of the server's answering work, which Close
// ends last. It reports false, and runs nothing, once that has ended.
func (h *Host) Go(f func(ctx context.Context)) bool { return h.s.life.Go(f) }

// OnRouter runs f on the server's router goroutine, between two messages,
// where Coordinator.Route runs, with the context Route gets. It waits for
// the router to take f, and reports false if the server closed or ctx
// ended first.
func (h *Host) OnRouter(ctx context.Context, f func(context.Context)) bool {
	select {
	case h.s.routerCalls <- f:
		return true
	case <-h.s.closed:
	case <-ctx.Done():
	}
	return false
}

// StartSession starts a session for client, replacing any it has, or
// refuses to as a new session is refused (ServerOptions.MaxSessions and
// the like). With params, the server initializes it on the client's
// behalf with them, and takes tags for the client's discovery tags: the
// client's session on another replica, taken over; without, it is a
// stateless session (CEP-35).
func (h *Host) StartSession(client nostr.PubKey, params []byte, tags nostr.Tags) (*ServerConn, *jsonrpc.Error) {
	if params == nil {
		return h.s.newSession(client, true)
	}
	c, refusal := h.s.newSession(client, false)
	if refusal == nil {
		c.rebuild(params, tags)
	}
	return c, refusal
}

// Dispatch acts on the message event evt, which came in a wrap of kind
// wrap (0: plaintext), as on one the server has claimed: its requests go
// to their sessions.
func (h *Host) Dispatch(ctx context.Context, evt nostr.Event, wrap nostr.Kind) {
	h.s.dispatch(ctx, evt, wrap)
}

// AnswerCalls answers, with e, the calls the message event id of client
// carried, without running them: ids are their JSON-RPC ids, one for a
// single request, all of a batch's calls for a batch (answered as one
// event, as batches are).
func (h *Host) AnswerCalls(ctx context.Context, id nostr.ID, client nostr.PubKey, wrap nostr.Kind, ids []jsonrpc.ID, batched bool, e *jsonrpc.Error) {
	s := h.s
	if !batched {
		if len(ids) == 1 {
			s.refuseNow(ctx, nostr.Event{ID: id, PubKey: client}, wrap, nil, 0, &jsonrpc.Request{ID: ids[0], Method: "?"}, e)
		}
		return
	}
	resps := make([]jsonrpc.Message, len(ids))
	for i, rid := range ids {
		resps[i] = &jsonrpc.Response{ID: rid, Error: e}
	}
	content, err := encodeBatch(resps)
	if err != nil {
		return
	}
	s.sendBatch(ctx, client, &batch{eventID: id, wrapKind: wrap}, content, nil)
}

// Reply publishes content to client as an answer, in the form the
// server's encryption mode allows for a message that came in wrap (0:
// plaintext).
func (h *Host) Reply(ctx context.Context, client nostr.PubKey, content string, tags nostr.Tags, wrap nostr.Kind) error {
	_, err := h.s.reply(ctx, client, content, tags, h.s.answerWrap(wrap))
	return err
}

// Adopt asks the server's Gate what became of the call, event id of
// client, that a lost replica had in flight: it answers it itself (ok),
// or returns the request event to run again (resume), or knows nothing of
// it (neither). A server without a Gate knows nothing of it.
func (h *Host) Adopt(ctx context.Context, id nostr.ID, client nostr.PubKey, wrap nostr.Kind) (resume *nostr.Event, ok bool) {
	if h.s.gate == nil {
		return nil, false
	}
	return h.s.gate.Adopt(ctx, id, client, wrap)
}
