package contextvm

import (
	"bytes"
	"context"
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

// DecodeContent parses the content of a KindMessage event. A JSON array is a
// batch (seed 002); batch reports which it was. An empty batch, a batch
// larger than 100 messages and any member that is not a JSON-RPC 2.0
// message are errors wrapping ErrNotMessage.
func DecodeContent(content string) (msgs []jsonrpc.Message, batch bool, err error) {
	data := bytes.TrimSpace([]byte(content))
	if len(data) == 0 {
		return nil, false, fmt.Errorf("%w: empty content", ErrNotMessage)
	}
	if data[0] != '[' {
		msg, err := jsonrpc.DecodeMessage(data)
		if err != nil {
			return nil, false, fmt.Errorf("%w: %v", ErrNotMessage, err)
		}
		return []jsonrpc.Message{msg}, false, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return nil, true, fmt.Errorf("%w: %v", ErrNotMessage, err)
	}
	switch {
	case len(raws) == 0:
		return nil, true, fmt.Errorf("%w: empty batch", ErrNotMessage)
	case len(raws) > maxBatch:
		return nil, true, fmt.Errorf("%w: batch of %d messages exceeds %d", ErrNotMessage, len(raws), maxBatch)
	}
	msgs = make([]jsonrpc.Message, 0, len(raws))
	for i, raw := range raws {
		msg, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			return nil, true, fmt.Errorf("%w: batch member %d: %v", ErrNotMessage, i, err)
		}
		msgs = append(msgs, msg)
	}
	return msgs, true, nil
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

// newMessageEvent builds and signs a KindMessage event.
func newMessageEvent(ctx context.Context, signer nostr.Signer, content string, tags nostr.Tags) (nostr.Event, error) {
	evt := nostr.Event{
		Kind:      KindMessage,
		CreatedAt: nostr.Now(),
		Tags:      tags,
		Content:   content,
	}
	if err := signer.SignEvent(ctx, &evt); err != nil {
		return nostr.Event{}, fmt.Errorf("sign message: %w", err)
	}
	return evt, nil
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
