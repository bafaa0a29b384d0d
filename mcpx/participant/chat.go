package participant

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Chat formats of seed 001 §8.1.
const (
	FormatPlain    = "plain"
	FormatMarkdown = "markdown"
)

// ChatMessage is a notifications/chat/message (seed 001 §8.1).
type ChatMessage struct {
	ID     string // the envelope id
	Seq    uint64 // the topic's sequence number (0 if the gateway keeps no history)
	TS     string // the producer's timestamp
	From   string
	Text   string
	Format string // plain or markdown; a message without one is plain
	Mine   bool   // sent by this participant (the gateway echoes broadcasts)
	// SaidFor is the peer that made this participant say it, by calling
	// its chat.say tool; empty for what the participant said itself. Only
	// the sender knows: the wire carries no trace of it.
	SaidFor string
}

// saidForMax bounds the chat.say envelopes remembered until their echo:
// an echo that never comes (a broadcast lost with the connection, a
// gateway without echoes) must not grow the map for ever.
const saidForMax = 1024

// Chat broadcasts a plain-text chat message to the topic.
func (c *Client) Chat(ctx context.Context, text string) (*mcpx.Envelope, error) {
	return c.Say(ctx, text, FormatPlain)
}

// Say broadcasts a chat message in format (FormatPlain, FormatMarkdown, or
// "" for plain) to the topic.
func (c *Client) Say(ctx context.Context, text, format string) (*mcpx.Envelope, error) {
	return c.say(ctx, text, format, "")
}

// SayConfirmed is Say that returns once the gateway has published the
// message (its echo came back: it is stored, if the topic keeps history)
// or refused it. A rate_limited refusal is waited out for the
// retry_after_ms the gateway asked for and the message sent again, as often
// as ctx allows; a reconnect meanwhile is survived as by every envelope.
// So messages said one after another with SayConfirmed are published in
// that order, each once, at the pace the gateway allows: what Say cannot
// promise, since the gateway refuses what comes faster than its rate.
//
// The error says what became of the message: a *GatewayError (refused),
// ErrNotSent (the gateway does not have it: ctx ended, or the client was
// closed, before it took it) or ErrUnconfirmed (ctx ended with the message
// on the wire, or the client could not tell after a reconnect: it may have
// been published).
func (c *Client) SayConfirmed(ctx context.Context, text, format string) (*mcpx.Envelope, error) {
	e, err := c.chatEnvelope(text, format)
	if err != nil {
		return nil, err
	}
	return e, c.sendConfirmed(ctx, e)
}

// say sends a chat message; saidFor names the peer whose chat.say call
// it is, remembered until the echo so that the event can say so.
func (c *Client) say(ctx context.Context, text, format, saidFor string) (*mcpx.Envelope, error) {
	e, err := c.chatEnvelope(text, format)
	if err != nil {
		return nil, err
	}
	if saidFor != "" {
		c.mu.Lock()
		if len(c.saidFor) >= saidForMax {
			clear(c.saidFor) // only labels are lost, never messages
		}
		c.saidFor[e.ID] = saidFor
		c.mu.Unlock()
	}
	if err := c.send(ctx, e); err != nil {
		c.mu.Lock()
		delete(c.saidFor, e.ID)
		c.mu.Unlock()
		return nil, err
	}
	return e, nil
}

// chatEnvelope is a chat message in format ("" for plain) to the topic.
func (c *Client) chatEnvelope(text, format string) (*mcpx.Envelope, error) {
	switch format {
	case "":
		format = FormatPlain
	case FormatPlain, FormatMarkdown:
	default:
		return nil, fmt.Errorf("mcpx: chat format %q: want %s or %s", format, FormatPlain, FormatMarkdown)
	}
	params, err := mcpmsg.Marshal(map[string]string{"text": text, "format": format})
	if err != nil {
		return nil, err
	}
	payload, err := encodeRPC(&jsonrpc.Request{Method: methodChat, Params: params})
	if err != nil {
		return nil, err
	}
	return c.envelope(nil, payload, ""), nil
}

func (c *Client) emitChat(e *mcpx.Envelope, m *jsonrpc.Request, replay bool) {
	var p struct {
		Text   string `json:"text"`
		Format string `json:"format"`
	}
	if json.Unmarshal(m.Params, &p) != nil {
		return
	}
	if p.Format == "" {
		p.Format = FormatPlain
	}
	msg := &ChatMessage{ID: e.ID, Seq: e.Seq, TS: e.TS, From: e.From, Text: p.Text, Format: p.Format}
	c.mu.Lock()
	if msg.Mine = e.From == c.self.ID; msg.Mine {
		msg.SaidFor = c.saidFor[e.ID]
		delete(c.saidFor, e.ID)
	}
	c.mu.Unlock()
	c.emit(Event{Type: EventChat, Envelope: e, Chat: msg, Replayed: replay})
}
