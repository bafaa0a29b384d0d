package contextvm

import (
	"context"
	"encoding/json"

	"fiatjaf.com/nostr"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A Gate stands between a server's sessions and its MCP handler
// (ServerOptions.Gate): each request a session receives is shown to it
// first, and it lets it through, or takes it, to ask for something before
// it runs (a payment: package contextvm/cep8, CEP-8), to refuse it, or to
// answer it itself. A server without one runs every request it receives.
//
// NewServer calls Attach once, before any other method; the others may
// be called at the same time, from any of the server's goroutines.
type Gate interface {
	// Attach readies the gate for the server of h; an error fails
	// NewServer.
	Attach(h *Host) error
	// Tags go on the server's announcement and with its discovery tags
	// (CEP-8's pmi tags).
	Tags() nostr.Tags
	// Session makes the gate's part of a new client session.
	Session() GateSession
	// Answered is handed the answer to a call the gate asked to see
	// (Call.Keep), as it goes out: a paid request's, kept to answer its
	// replays.
	Answered(ctx context.Context, call *Call, content string)
	// Replayed is told of a message event the server received again after
	// it had acted on it: the gate may answer it (from what it kept), on
	// the server's goroutine, or let it go unanswered.
	Replayed(ctx context.Context, evt nostr.Event, wrap nostr.Kind)
	// Cancelled is told that the client cancelled the call with key
	// (Call.Key) while it was in flight; true if the gate holds it (the
	// MCP handler never saw it): the server forwards no cancellation.
	Cancelled(key string) bool
	// Adopt says what became of the call, message event id of client,
	// that a lost replica of the server's group had in flight (see
	// Host.Adopt).
	Adopt(ctx context.Context, id nostr.ID, client nostr.PubKey, wrap nostr.Kind) (resume *nostr.Event, ok bool)
}

// A GateSession is a Gate's part of one client session.
type GateSession interface {
	// Learn reads the tags of each message the session receives. It is
	// called under the session's lock, and must not call back into it.
	Learn(tags nostr.Tags)
	// Tags are added to the session's discovery tags (the first message
	// it sends the client), under the session's lock.
	Tags() nostr.Tags
	// Admit is shown each request (a call, not a notification) the
	// session receives, before the MCP handler: false lets it through;
	// true means the gate took it, and will run it (Call.Run), answer it
	// (Call.Answer) or drop it (Call.Drop), once.
	Admit(call *Call) bool
}

// A Call is one request a session received, as its Gate sees it.
type Call struct {
	c   *ServerConn
	key string
	r   *route
	evt nostr.Event      // the message event that carried it
	m   *jsonrpc.Request // as the client sent it
	fwd *jsonrpc.Request // as the MCP handler gets it
}

// Client is the caller's public key.
func (k *Call) Client() nostr.PubKey { return k.c.client }

// Key names the call in its session: the id the MCP handler knows it by.
func (k *Call) Key() string { return k.key }

// Event is the message event that carried the call.
func (k *Call) Event() nostr.Event { return k.evt }

// Request is the call as the client sent it.
func (k *Call) Request() *jsonrpc.Request { return k.m }

// Wrap is the kind of gift wrap the call came in, 0 for plaintext.
func (k *Call) Wrap() nostr.Kind { return k.r.wrapKind }

// Created is the created_at of the event the call came in.
func (k *Call) Created() nostr.Timestamp { return k.r.created }

// Batched reports whether the call came in a JSON-RPC batch.
func (k *Call) Batched() bool { return k.r.batch != nil }

// Go runs f, which answers the call, on a goroutine of the session, or of
// the server when the session is closing: a call the gate took is no
// longer the session's to answer when it closes.
func (k *Call) Go(f func(ctx context.Context)) { k.c.answerLater(f) }

// Run hands the call to the MCP handler.
func (k *Call) Run() { k.c.forward(k.key, k.m, k.fwd) }

// Answer answers the call with e, if it is still in flight.
func (k *Call) Answer(ctx context.Context, e *jsonrpc.Error) {
	if r := k.c.routes.drop(k.key); r != nil {
		k.c.answer(ctx, r, &jsonrpc.Response{ID: r.origID, Error: e})
	}
}

// Reply answers the call with result, if it is still in flight: a
// request the gate serves itself (a method of its own).
func (k *Call) Reply(ctx context.Context, result json.RawMessage) {
	if r := k.c.routes.drop(k.key); r != nil {
		k.c.answer(ctx, r, &jsonrpc.Response{ID: r.origID, Result: result})
	}
}

// SetMeta puts value under key in the _meta of the call's result when it
// goes out (before the Gate's Answered sees it): what the gate tells the
// client about a call it let run, such as a payment channel's state. An
// error answer, or a result that is not a JSON object, goes out as it is.
func (k *Call) SetMeta(key string, value json.RawMessage) {
	k.r.mu.Lock()
	defer k.r.mu.Unlock()
	if k.r.meta == nil {
		k.r.meta = map[string]json.RawMessage{}
	}
	k.r.meta[key] = value
}

// AnswerAfter holds the call's answer, when it comes, until done is
// closed (or the session ends): a notification about the call that is
// sent on another goroutine while the call runs (CEP-8's
// payment_accepted) still reaches the relay before the answer does.
func (k *Call) AnswerAfter(done <-chan struct{}) {
	k.r.mu.Lock()
	defer k.r.mu.Unlock()
	k.r.after = done
}

// Drop ends the call without an answer: it was cancelled, or another
// replica answers it.
func (k *Call) Drop() { k.c.routes.drop(k.key) }

// Keep asks for the call's answer: the Gate's Answered gets it as it goes
// out.
func (k *Call) Keep() {
	k.r.mu.Lock()
	defer k.r.mu.Unlock()
	k.r.kept = k
}

// OrigID is the call's JSON-RPC id, as the client sent it.
func (k *Call) OrigID() jsonrpc.ID { return k.r.origID }

// Notify sends the client a notification about the call (method with
// params), correlated by its event id.
func (k *Call) Notify(ctx context.Context, method string, params any) {
	if err := k.NotifyWith(ctx, method, params, nil); err != nil {
		k.c.srv.log.Info("notification about a call not delivered", "session", k.c.id, "method", method, "err", err)
	}
}

// NotifyWith is Notify with tags of its own on the event (CEP-8's change
// tag on payment_accepted), and says whether the notification was
// delivered: an error means no relay took it, or none had a listener for
// the client (nostrx.ErrUnheard), which is as close as Nostr comes to
// telling that the client is gone.
func (k *Call) NotifyWith(ctx context.Context, method string, params any, tags nostr.Tags) error {
	c, r := k.c, k.r
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	content, err := EncodeContent(&jsonrpc.Request{Method: method, Params: raw})
	if err != nil {
		return err
	}
	c.mu.Lock()
	all := append(nostr.Tags{{"p", c.client.Hex()}, {"e", r.eventID.Hex()}}, c.discoveryLocked()...)
	wrap := c.wrapKindLocked(r.wrapKind)
	c.mu.Unlock()
	_, err = c.srv.reply(ctx, c.client, content, append(all, tags...), wrap)
	return err
}
