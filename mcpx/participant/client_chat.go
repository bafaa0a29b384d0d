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

// say sends a chat message; saidFor names the peer whose chat.say call
// it is, remembered until the echo so that the event can say so.
func (c *Client) say(ctx context.Context, text, format, saidFor string) (*mcpx.Envelope, error) {
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
	e := c.envelope(nil, payload, "")
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
