package relaytest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/coder/websocket"
)

// Answer is what a scripted relay answers one REQ with: events, then EOSE
// if eose is set. A REQ answered with neither stays unanswered.
type Answer struct {
	Events []nostr.Event
	EOSE   bool
}

// Scripted serves, until the test ends, a relay that answers each REQ as
// answer says, whatever it is, and ignores every other message: a relay
// that lies, or one that never confirms a subscription. It returns the
// relay's ws:// URL.
func Scripted(tb testing.TB, answer func(filters []nostr.Filter) Answer) string {
	tb.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			_, data, err := c.Read(r.Context())
			if err != nil {
				return
			}
			var msg []json.RawMessage
			var sub string
			if json.Unmarshal(data, &msg) != nil || len(msg) < 2 || string(msg[0]) != `"REQ"` || json.Unmarshal(msg[1], &sub) != nil {
				continue
			}
			var filters []nostr.Filter
			for _, raw := range msg[2:] {
				var f nostr.Filter
				if json.Unmarshal(raw, &f) == nil {
					filters = append(filters, f)
				}
			}
			a := answer(filters)
			var frames [][]any
			for _, evt := range a.Events {
				frames = append(frames, []any{"EVENT", sub, evt})
			}
			if a.EOSE {
				frames = append(frames, []any{"EOSE", sub})
			}
			for _, frame := range frames {
				b, _ := json.Marshal(frame)
				if c.Write(r.Context(), websocket.MessageText, b) != nil {
					return
				}
			}
		}
	}))
	tb.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}
