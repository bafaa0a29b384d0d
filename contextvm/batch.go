package contextvm

import (
	"sync"

	"fiatjaf.com/nostr"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// batch collects the answers to a JSON-RPC batch (seed 002), which travel
// back together as one event once every request in it is answered.
// Notifications in a batch get no answer.
type batch struct {
	eventID  nostr.ID
	wrapKind nostr.Kind

	mu        sync.Mutex
	responses []*jsonrpc.Response // by position in the batch; nil for notifications
	waiting   int
}

func newBatch(inner nostr.Event, wrapKind nostr.Kind, msgs []jsonrpc.Message) *batch {
	b := &batch{eventID: inner.ID, wrapKind: wrapKind, responses: make([]*jsonrpc.Response, len(msgs))}
	for _, m := range msgs {
		if r, ok := m.(*jsonrpc.Request); ok && r.IsCall() {
			b.waiting++
		}
	}
	return b
}

// answer records the response to the request at position i. When it was the
// last one awaited, it returns the batch's content and done.
func (b *batch) answer(i int, resp *jsonrpc.Response) (content string, done bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.responses[i] != nil || b.waiting == 0 {
		return "", false
	}
	b.responses[i] = resp
	b.waiting--
	if b.waiting > 0 {
		return "", false
	}
	var out []jsonrpc.Message
	for _, r := range b.responses {
		if r != nil {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return "", true
	}
	content, err := encodeBatch(out)
	if err != nil {
		return "", true
	}
	return content, true
}
