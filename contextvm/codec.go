package contextvm

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"fiatjaf.com/nostr"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// ErrNotMessage is returned when an event's content is not a JSON-RPC message
// or batch.
var ErrNotMessage = errors.New("content is not a JSON-RPC message")

// maxBatch bounds the messages of one inbound JSON-RPC batch, so that one
// event cannot make a peer start thousands of handlers.
const maxBatch = 100

// EncodeContent is the content of a KindMessage event carrying msg: its
// compact JSON-RPC encoding, exactly what the reference SDK's
// JSON.stringify produces up to member order.
func EncodeContent(msg jsonrpc.Message) (string, error) {
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// ContentError says why an event's content is not JSON-RPC that can be
// acted on, in the terms of a JSON-RPC error answer: Code is -32700 (not
// JSON) or -32600 (JSON, but not a valid request, or a batch that is empty
// or too large), and ID the message's id when one could be read (else the
// invalid ID, which encodes as null). It matches ErrNotMessage.
type ContentError struct {
	Code   int64
	ID     jsonrpc.ID
	Reason string
}

func (e *ContentError) Error() string { return fmt.Sprintf("%v: %s", ErrNotMessage, e.Reason) }
func (e *ContentError) Unwrap() error { return ErrNotMessage }

// answer is the JSON-RPC error answer to the content.
func (e *ContentError) answer() *jsonrpc.Response {
	return &jsonrpc.Response{ID: e.ID, Error: &jsonrpc.Error{Code: e.Code, Message: e.Reason}}
}

// invalidContent classifies data that did not decode as a message.
func invalidContent(data []byte, err error, where string) *ContentError {
	if !json.Valid(data) {
		return &ContentError{Code: jsonrpc.CodeParseError, Reason: where + "not JSON: " + err.Error()}
	}
	e := &ContentError{Code: jsonrpc.CodeInvalidRequest, Reason: where + "not a JSON-RPC 2.0 message: " + err.Error()}
	var probe struct {
		ID any `json:"id"`
	}
	if json.Unmarshal(data, &probe) == nil {
		switch probe.ID.(type) {
		case string, float64:
			e.ID, _ = jsonrpc.MakeID(probe.ID)
		}
	}
	return e
}

// DecodeContent parses the content of a KindMessage event. A JSON array is a
// batch (seed 002); batch reports which it was. Content that is not JSON,
// not a JSON-RPC 2.0 message, an empty batch, a batch larger than 100
// messages or with a member that is not a message, is a *ContentError.
func DecodeContent(content string) (msgs []jsonrpc.Message, batch bool, err error) {
	data := bytes.TrimSpace([]byte(content))
	if len(data) == 0 {
		return nil, false, &ContentError{Code: jsonrpc.CodeParseError, Reason: "empty content"}
	}
	if data[0] != '[' {
		msg, err := jsonrpc.DecodeMessage(data)
		if err != nil {
			return nil, false, invalidContent(data, err, "")
		}
		return []jsonrpc.Message{msg}, false, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return nil, true, &ContentError{Code: jsonrpc.CodeParseError, Reason: "not JSON: " + err.Error()}
	}
	switch {
	case len(raws) == 0:
		return nil, true, &ContentError{Code: jsonrpc.CodeInvalidRequest, Reason: "empty batch"}
	case len(raws) > maxBatch:
		return nil, true, &ContentError{Code: jsonrpc.CodeInvalidRequest, Reason: fmt.Sprintf("batch of %d messages exceeds %d", len(raws), maxBatch)}
	}
	msgs = make([]jsonrpc.Message, 0, len(raws))
	for i, raw := range raws {
		msg, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			// The whole batch is refused, none of it run: an answer per
			// member would need ids the invalid member may not have.
			e := invalidContent(raw, err, fmt.Sprintf("batch member %d: ", i))
			e.Code, e.ID = jsonrpc.CodeInvalidRequest, jsonrpc.ID{}
			return nil, true, e
		}
		msgs = append(msgs, msg)
	}
	return msgs, true, nil
}

// encodeErrorAnswer encodes an error answer. One to a message whose id
// could not be read says "id": null, as JSON-RPC requires; the go-sdk's
// encoder would leave the member out.
func encodeErrorAnswer(resp *jsonrpc.Response) (string, error) {
	if resp.ID.IsValid() {
		return EncodeContent(resp)
	}
	var werr *jsonrpc.Error
	if !errors.As(resp.Error, &werr) {
		return "", fmt.Errorf("contextvm: an answer without an id must be an error")
	}
	b, err := json.Marshal(struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      any            `json:"id"`
		Error   *jsonrpc.Error `json:"error"`
	}{"2.0", nil, werr})
	return string(b), err
}

// encodeBatch is the content of a batch event.
func encodeBatch(msgs []jsonrpc.Message) (string, error) {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, m := range msgs {
		if i > 0 {
			buf.WriteByte(',')
		}
		b, err := jsonrpc.EncodeMessage(m)
		if err != nil {
			return "", err
		}
		buf.Write(b)
	}
	buf.WriteByte(']')
	return buf.String(), nil
}

// newMessageEvent builds and signs a KindMessage event, with a nonce tag
// unless tags has one (see nonceTag).
func newMessageEvent(ctx context.Context, signer nostr.Signer, content string, tags nostr.Tags) (nostr.Event, error) {
	evt := nostr.Event{
		Kind:      KindMessage,
		CreatedAt: nostr.Now(),
		Tags:      withNonce(tags),
		Content:   content,
	}
	if err := signer.SignEvent(ctx, &evt); err != nil {
		return nostr.Event{}, fmt.Errorf("sign message: %w", err)
	}
	return evt, nil
}

// nonceTag makes every message event a distinct event. An event id is the
// hash of its content, tags and created_at in seconds: two messages alike
// within a second (a script calling cvm in a loop sends the same
// initialize; an upstream sends the same list_changed twice; two identical
// log lines) would otherwise be one event, and the peer, rightly
// deduplicating replays, would drop the second. Peers ignore tags they do
// not know; NIP-13 uses the same tag name to vary an id.
func nonceTag() nostr.Tag {
	var b [8]byte
	rand.Read(b[:])
	return nostr.Tag{"nonce", hex.EncodeToString(b[:])}
}

// withNonce returns tags with a nonce tag, added if it has none.
func withNonce(tags nostr.Tags) nostr.Tags {
	if _, ok := firstTagValue(tags, "nonce"); ok {
		return tags
	}
	return append(tags[:len(tags):len(tags)], nonceTag())
}

// firstTagValue returns the value of the first tag named name.
func firstTagValue(tags nostr.Tags, name string) (string, bool) {
	for _, t := range tags {
		if len(t) >= 2 && t[0] == name {
			return t[1], true
		}
	}
	return "", false
}

// hasPTag reports whether tags address pk.
func hasPTag(tags nostr.Tags, pk nostr.PubKey) bool {
	hex := pk.Hex()
	for _, t := range tags {
		if len(t) >= 2 && t[0] == "p" && t[1] == hex {
			return true
		}
	}
	return false
}
