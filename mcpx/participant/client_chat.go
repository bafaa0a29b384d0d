package participant

import (
	"context"
	"encoding/json"

	"github.com/cvmgo/cvm/mcpx"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// ChatMessage is a notifications/chat/message (seed 001 §8.1).
type ChatMessage struct {
	ID     string // the envelope id
	Seq    uint64 // the topic's sequence number (0 if the gateway keeps no history)
	TS     string // the producer's timestamp
	From   string
	Text   string
	Format string // plain or markdown
	Mine   bool   // sent by this participant (the gateway echoes broadcasts)
}

// Chat broadcasts a plain-text chat message to the topic.
func (c *Client) Chat(ctx context.Context, text string) (*mcpx.Envelope, error) {
	return c.Notify(ctx, nil, methodChat, map[string]string{"text": text, "format": "plain"})
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
		p.Format = "plain"
	}
	msg := &ChatMessage{ID: e.ID, Seq: e.Seq, TS: e.TS, From: e.From, Text: p.Text, Format: p.Format, Mine: e.From == c.Self().ID}
	c.emit(Event{Type: EventChat, Envelope: e, Chat: msg, Replayed: replay})
}
