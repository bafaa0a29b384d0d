package mcpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// The examples of the v0 spec (seed 001), verbatim but for comments, which
// JSON does not allow.
var specExamples = map[string]struct {
	frame string
	class MessageClass
}{
	"4.1 initialize request": {`{
  "protocol": "mcp-x/v0",
  "id": "env-init-1",
  "ts": "2025-08-17T14:00:00Z",

  "from": "coordinator",
  "to": ["robot-alpha"],
  "kind": "mcp",
  "payload": {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
      "protocolVersion": "2025-06-18",
      "capabilities": { "sampling": {}, "elicitation": {}, "roots": {} },
      "clientInfo": { "name": "Coordinator", "version": "1.0.0" }
    }
  }
}`, ClassRequest},
	"4.1.1 response":                     {`{"protocol":"mcp-x/v0","id":"env-2","ts":"2025-08-17T14:00:00Z","from":"robot-alpha","to":["coordinator"],"kind":"mcp","correlation_id":"env-1","payload":{"jsonrpc":"2.0","id":42,"result":{"status":"ok"}}}`, ClassResponse},
	"4.1.1 acknowledgement notification": {`{"protocol":"mcp-x/v0","id":"env-3","ts":"2025-08-17T14:00:05Z","from":"coordinator","to":["robot-alpha"],"kind":"mcp","correlation_id":"env-chat-1","payload":{"jsonrpc":"2.0","method":"notifications/message_acknowledged","params":{"original_id":"env-chat-1"}}}`, ClassNotification},
	"8.1 broadcast chat":                 {`{"protocol":"mcp-x/v0","id":"env-chat-1","ts":"2025-08-17T14:05:00Z","from":"user-alice","kind":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/chat/message","params":{"text":"Hello everyone!","format":"plain"}}}`, ClassNotification},
	"13.1 request with a string id":      {`{"protocol":"mcp-x/v0","id":"env-1","ts":"2025-08-17T14:00:00Z","from":"coordinator","to":["robot-alpha"],"kind":"mcp","payload":{"jsonrpc":"2.0","id":"42","method":"tools/call","params":{"name":"robot.move","arguments":{"x":1,"y":2}}}}`, ClassRequest},
	"13.1 response with a string id":     {`{"protocol":"mcp-x/v0","id":"env-2","ts":"2025-08-17T14:00:00Z","from":"robot-alpha","to":["coordinator"],"kind":"mcp","correlation_id":"env-1","payload":{"jsonrpc":"2.0","id":"42","result":{"status":"ok"}}}`, ClassResponse},
	"13.3 progress":                      {`{"protocol":"mcp-x/v0","id":"env-progress-1","ts":"2025-08-17T14:00:10Z","from":"robot-alpha","to":["coordinator"],"kind":"mcp","correlation_id":"env-1","payload":{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":42,"progress":0.5,"total":1.0}}}`, ClassNotification},
	"13.4 cancellation":                  {`{"protocol":"mcp-x/v0","id":"env-cancel-1","ts":"2025-08-17T14:00:15Z","from":"coordinator","to":["robot-alpha"],"kind":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":42,"reason":"User cancelled operation"}}}`, ClassNotification},
	"reference 3.4 tools/list":           {`{"protocol":"mcp-x/v0","id":"env-req-1","ts":"2025-11-22T10:00:00.000Z","from":"alice","to":["bob"],"kind":"mcp","payload":{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}}`, ClassRequest},
	"reference 3.4 reply":                {`{"protocol":"mcp-x/v0","id":"env-resp-1","ts":"2025-11-22T10:00:00.001Z","from":"bob","to":["alice"],"kind":"mcp","correlation_id":"env-req-1","payload":{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}}`, ClassResponse},
	"JSON-RPC error with null id":        {`{"protocol":"mcp-x/v0","id":"e","ts":"2025-08-17T14:00:00Z","from":"a","to":["b"],"kind":"mcp","correlation_id":"x","payload":{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}}`, ClassResponse},
}

func TestDecodeEnvelope_SpecExamples(t *testing.T) {
	for name, ex := range specExamples {
		t.Run(name, func(t *testing.T) {
			e, class, err := DecodeEnvelope([]byte(ex.frame))
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if class != ex.class {
				t.Errorf("class %d, want %d", class, ex.class)
			}
			var want struct {
				Payload json.RawMessage `json:"payload"`
			}
			json.Unmarshal([]byte(ex.frame), &want)
			if !bytes.Equal(e.Payload, want.Payload) {
				t.Errorf("payload bytes changed:\n got %s\nwant %s", e.Payload, want.Payload)
			}
		})
	}
}

func TestDecodeEnvelope_Refusals(t *testing.T) {
	const ok = `"protocol":"mcp-x/v0","id":"e1","ts":"2025-08-17T14:00:00Z","from":"a","kind":"mcp"`
	const note = `"payload":{"jsonrpc":"2.0","method":"n"}`
	cases := []struct {
		name, frame string
		code        Code
		correlate   string // the id the error must carry
		mention     string // a word the message must contain
	}{
		{"not JSON (reference 3.7)", `{'`, CodeInvalidEnvelope, "", "JSON"},
		{"an array", `[1]`, CodeInvalidEnvelope, "", "object"},
		{"protocol mcp-x/v1 (reference 3.7)", `{"protocol":"mcp-x/v1","id":"e1","ts":"2025-08-17T14:00:00Z","from":"a","kind":"mcp",` + note + `}`, CodeUnsupportedProtocol, "e1", "mcp-x/v0"},
		{"protocol missing", `{"id":"e1","ts":"2025-08-17T14:00:00Z","from":"a","kind":"mcp",` + note + `}`, CodeInvalidEnvelope, "e1", "protocol"},
		{"payload is an array (reference 3.7)", `{` + ok + `,"payload":[]}`, CodeInvalidEnvelope, "e1", "payload"},
		{"payload missing", `{` + ok + `}`, CodeInvalidEnvelope, "e1", "payload"},
		{"id missing", `{"protocol":"mcp-x/v0","ts":"2025-08-17T14:00:00Z","from":"a","kind":"mcp",` + note + `}`, CodeInvalidEnvelope, "", "id"},
		{"id a number", `{"protocol":"mcp-x/v0","id":7,"ts":"2025-08-17T14:00:00Z","from":"a","kind":"mcp",` + note + `}`, CodeInvalidEnvelope, "", "id"},
		{"id too long", `{"protocol":"mcp-x/v0","id":"` + strings.Repeat("x", 300) + `","ts":"2025-08-17T14:00:00Z","from":"a","kind":"mcp",` + note + `}`, CodeInvalidEnvelope, "", "bytes"},
		{"ts not RFC 3339", `{"protocol":"mcp-x/v0","id":"e1","ts":"yesterday","from":"a","kind":"mcp",` + note + `}`, CodeInvalidEnvelope, "e1", "RFC 3339"},
		{"from missing", `{"protocol":"mcp-x/v0","id":"e1","ts":"2025-08-17T14:00:00Z","kind":"mcp",` + note + `}`, CodeInvalidEnvelope, "e1", "from"},
		{"to a string", `{` + ok + `,"to":"bob",` + note + `}`, CodeInvalidEnvelope, "e1", "to"},
		{"to with an empty id", `{` + ok + `,"to":[""],` + note + `}`, CodeInvalidEnvelope, "e1", "empty"},
		{"kind unknown", `{"protocol":"mcp-x/v0","id":"e1","ts":"2025-08-17T14:00:00Z","from":"a","kind":"chat",` + note + `}`, CodeInvalidEnvelope, "e1", "kind"},
		{"kind presence (reference 3.8)", `{"protocol":"mcp-x/v0","id":"e1","ts":"2025-08-17T14:00:00Z","from":"a","kind":"presence","payload":{"event":"leave","participant":{"id":"bob"}}}`, CodeReservedKind, "e1", "gateway"},
		{"kind system (reference 3.8)", `{"protocol":"mcp-x/v0","id":"e1","ts":"2025-08-17T14:00:00Z","from":"a","kind":"system","payload":{"event":"welcome"}}`, CodeReservedKind, "e1", "gateway"},
		{"client-assigned seq", `{` + ok + `,"seq":9,` + note + `}`, CodeInvalidEnvelope, "e1", "seq"},
		{"not JSON-RPC 2.0", `{` + ok + `,"payload":{"method":"x"}}`, CodeInvalidEnvelope, "e1", "jsonrpc"},
		{"neither method nor result", `{` + ok + `,"payload":{"jsonrpc":"2.0","id":1}}`, CodeInvalidEnvelope, "e1", "method"},
		{"request id an object", `{` + ok + `,"to":["b"],"payload":{"jsonrpc":"2.0","id":{},"method":"m"}}`, CodeInvalidEnvelope, "e1", "id"},
		{"request broadcast (reference 3.5)", `{` + ok + `,"payload":{"jsonrpc":"2.0","id":1,"method":"tools/list"}}`, CodeRequestRecipients, "e1", "exactly one"},
		{"request to [] (reference 3.5)", `{` + ok + `,"to":[],"payload":{"jsonrpc":"2.0","id":1,"method":"tools/list"}}`, CodeRequestRecipients, "e1", "exactly one"},
		{"request to two (reference 3.5)", `{` + ok + `,"to":["bob","carol"],"payload":{"jsonrpc":"2.0","id":1,"method":"tools/list"}}`, CodeRequestRecipients, "e1", "exactly one"},
		{"response without correlation_id", `{` + ok + `,"to":["b"],"payload":{"jsonrpc":"2.0","id":1,"result":{}}}`, CodeMissingCorrelation, "e1", "correlation_id"},
		{"empty correlation_id", `{` + ok + `,"correlation_id":"",` + note + `}`, CodeInvalidEnvelope, "e1", "correlation_id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := DecodeEnvelope([]byte(c.frame))
			var ee *EnvelopeError
			if !errors.As(err, &ee) {
				t.Fatalf("accepted, or not an EnvelopeError: %v", err)
			}
			if ee.Code != c.code || ee.EnvelopeID != c.correlate {
				t.Errorf("code %s id %q, want %s %q (%s)", ee.Code, ee.EnvelopeID, c.code, c.correlate, ee.Message)
			}
			if !strings.Contains(ee.Message, c.mention) {
				t.Errorf("message %q does not mention %q", ee.Message, c.mention)
			}
		})
	}
}

func TestEnvelope_AppendJSONKeepsPayloadBytes(t *testing.T) {
	// Whitespace, key order, HTML characters and number spellings inside the
	// payload must survive: the gateway never rewrites MCP payloads.
	payload := `{ "jsonrpc":"2.0",  "method":"notifications/chat/message",
	  "params":{"text":"<b>&amp; 1e3 \u00e9</b>","n":1.0E+2,"z":0} }`
	frame := `{"id":"e","ts":"2025-08-17T14:00:00Z","from":"a","kind":"mcp","protocol":"mcp-x/v0","payload":` + payload + `,"extra":1}`
	e, _, err := DecodeEnvelope([]byte(frame))
	if err != nil {
		t.Fatal(err)
	}
	e.Seq = 7
	out := e.AppendJSON(nil)
	want := `{"protocol":"mcp-x/v0","id":"e","ts":"2025-08-17T14:00:00Z","from":"a","kind":"mcp","payload":` + payload + `,"seq":7}`
	if string(out) != want {
		t.Fatalf("encoded\n%s\nwant\n%s", out, want)
	}
	if !json.Valid(out) {
		t.Fatal("not valid JSON")
	}
}

func TestEnvelope_AppendJSONEscapesLikeEncodingJSON(t *testing.T) {
	for _, s := range []string{"plain", `q"uote\back`, "ctl\x00\x01\x1f\n\r\t", "é世界", "bad\xffutf8", "line\u2028sep\u2029", "<&>"} {
		got := appendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q encoded as %s: %v", s, got, err)
		}
		want, _ := json.Marshal(s)
		var wantBack string
		json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Errorf("%q round-trips to %q, encoding/json gives %q", s, back, wantBack)
		}
	}
}
