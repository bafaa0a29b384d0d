package mcpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzDecodeEnvelope checks the decoder never panics, only refuses with an
// EnvelopeError, and that what it accepts re-encodes to valid JSON that
// decodes to the same envelope with the payload bytes unchanged. The seeds
// (the spec's examples and the reference transcripts' frames) run in every
// normal test run.
func FuzzDecodeEnvelope(f *testing.F) {
	for _, ex := range specExamples {
		f.Add([]byte(ex.frame))
	}
	for _, s := range []string{
		`{'`, `[]`, `null`, `{}`, `{"protocol":"mcp-x/v1"}`,
		`{"protocol":"mcp-x/v0","id":"e","ts":"2025-08-17T14:00:00Z","from":"a","kind":"presence","payload":{"event":"leave","participant":{"id":"bob"}}}`,
		`{"protocol":"mcp-x/v0","id":"e","ts":"2025-08-17T14:00:00Z","from":"a","from":"b","kind":"mcp","payload":{"jsonrpc":"2.0","method":"m"}}`,
		`{"protocol":"mcp-x/v0","id":"\u0000\ud800","ts":"2025-08-17T14:00:00.123456789+01:00","from":"a","to":["b","b"],"kind":"mcp","payload":{"jsonrpc":"2.0","id":-1e9,"method":"m"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, class, err := DecodeEnvelope(data)
		if err != nil {
			var ee *EnvelopeError
			if !errors.As(err, &ee) || ee.Code == "" || ee.Message == "" {
				t.Fatalf("refusal is not a complete EnvelopeError: %#v", err)
			}
			return
		}
		if class == ClassNone {
			t.Fatal("accepted with no message class")
		}
		e.Seq = 42
		out := e.AppendJSON(nil)
		if !json.Valid(out) {
			t.Fatalf("re-encoding is not JSON: %s", out)
		}
		e2, class2, err := DecodeEnvelopeWithSeq(out)
		if err != nil {
			t.Fatalf("re-encoding refused: %v\n%s", err, out)
		}
		if class2 != class || e2.ID != e.ID || e2.From != e.From || e2.Kind != e.Kind || e2.TS != e.TS ||
			e2.CorrelationID != e.CorrelationID || len(e2.To) != len(e.To) || e2.Seq != 42 {
			t.Fatalf("round trip changed the envelope:\n%+v\n%+v", e, e2)
		}
		if !bytes.Equal(e2.Payload, e.Payload) {
			t.Fatalf("payload changed:\n%s\n%s", e.Payload, e2.Payload)
		}
	})
}

// DecodeEnvelopeWithSeq decodes a frame the gateway emitted (it has seq).
func DecodeEnvelopeWithSeq(data []byte) (*Envelope, MessageClass, error) {
	var probe struct {
		Seq uint64 `json:"seq"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, ClassNone, err
	}
	// seq is always the last field the gateway writes.
	i := bytes.LastIndex(data, []byte(`,"seq":`))
	if i < 0 {
		return nil, ClassNone, errors.New("no seq")
	}
	stripped := append(bytes.Clone(data[:i]), '}')
	e, class, err := DecodeEnvelope(stripped)
	if e != nil {
		e.Seq = probe.Seq
	}
	return e, class, err
}
