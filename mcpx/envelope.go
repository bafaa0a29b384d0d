package mcpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// Protocol is the value of every envelope's protocol field in MCPx v0.
const Protocol = "mcp-x/v0"

// Subprotocol is the WebSocket subprotocol that advertises MCPx v0 support.
const Subprotocol = "mcp-x.v0"

// DefaultProtocolVersion is the MCP version the client and the bridge ask
// for in initialize. Peers negotiate down (MCPx v0 requires at least the
// 2025-06-18 negotiation rules); the TypeScript SDK tops out here.
const DefaultProtocolVersion = "2025-11-25"

// GatewayID is the from of every envelope the gateway itself emits.
const GatewayID = "system:gateway"

// The envelope kinds of v0. Only KindMCP may be sent by participants;
// presence and system envelopes are the gateway's.
const (
	KindMCP      = "mcp"
	KindPresence = "presence"
	KindSystem   = "system"
)

// Field limits. They bound what one envelope can make the gateway hold and
// index; real ids (UUIDs, "env-42") are far shorter.
const (
	maxIDBytes         = 256
	maxRecipients      = 256
	maxParticipantID   = 128
	maxTimestampLength = 64
)

// Envelope is one MCPx v0 message. Payload is kept as the exact bytes the
// producer sent: the gateway never rewrites MCP payloads.
type Envelope struct {
	Protocol      string          `json:"protocol"`
	ID            string          `json:"id"`
	TS            string          `json:"ts"`
	From          string          `json:"from"`
	To            []string        `json:"to,omitempty"`
	Kind          string          `json:"kind"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	Payload       json.RawMessage `json:"payload"`
	// Seq is the topic's sequence number, assigned by the gateway to every
	// envelope it stores; 0 means none. v0 clients ignore the field.
	Seq uint64 `json:"seq,omitempty"`
}

// Broadcast reports whether e is addressed to every participant.
func (e *Envelope) Broadcast() bool { return len(e.To) == 0 }

// rpcShape is what the gateway reads of an MCP payload: enough to tell a
// request from a notification or a response. Params and results are skipped.
type rpcShape struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// MessageClass is what an MCP payload is, in JSON-RPC terms.
type MessageClass int

const (
	ClassNone         MessageClass = iota // not an mcp envelope
	ClassRequest                          // method and id
	ClassNotification                     // method, no id
	ClassResponse                         // id and result or error, no method
)

// wireEnvelope decodes with pointer fields so that a missing field can be
// told from an empty one, and with a guard against a client-assigned seq.
type wireEnvelope struct {
	Protocol      *string         `json:"protocol"`
	ID            *string         `json:"id"`
	TS            *string         `json:"ts"`
	From          *string         `json:"from"`
	To            *[]string       `json:"to"`
	Kind          *string         `json:"kind"`
	CorrelationID *string         `json:"correlation_id"`
	Payload       json.RawMessage `json:"payload"`
	Seq           json.RawMessage `json:"seq"`
}

// DecodeEnvelope parses and validates one frame sent by a participant. It
// checks everything that can be checked without knowing who sent it: the
// schema, the protocol version, the shape of an MCP payload and the rule
// that a request names exactly one recipient. The returned error is an
// *EnvelopeError whose Code says what was wrong; when the frame had a
// readable id, the error's EnvelopeID carries it so the reply can correlate.
//
// The envelope returned on error is partially filled and must not be routed.
func DecodeEnvelope(data []byte) (*Envelope, MessageClass, error) {
	var w wireEnvelope
	decodeErr := json.Unmarshal(data, &w)
	e := &Envelope{}
	if w.ID != nil {
		e.ID = *w.ID
	}
	fail := func(code Code, format string, args ...any) (*Envelope, MessageClass, error) {
		id := e.ID
		if len(id) > maxIDBytes || !utf8.ValidString(id) {
			id = ""
		}
		return e, ClassNone, &EnvelopeError{Code: code, EnvelopeID: id, Message: fmt.Sprintf(format, args...)}
	}
	if decodeErr != nil {
		// encoding/json keeps decoding past a type error, so the id may
		// still be known and the error can correlate.
		return fail(CodeInvalidEnvelope, "%s", jsonProblem(decodeErr))
	}
	switch {
	case w.Protocol == nil:
		return fail(CodeInvalidEnvelope, "protocol is missing; it must be %q", Protocol)
	case *w.Protocol != Protocol:
		return fail(CodeUnsupportedProtocol, "protocol %q is not supported; this gateway speaks %q", *w.Protocol, Protocol)
	case w.ID == nil || *w.ID == "":
		return fail(CodeInvalidEnvelope, "id is missing or empty; give every envelope a unique id (e.g. a UUID)")
	case len(*w.ID) > maxIDBytes:
		return fail(CodeInvalidEnvelope, "id is %d bytes; at most %d are allowed", len(*w.ID), maxIDBytes)
	case w.TS == nil:
		return fail(CodeInvalidEnvelope, "ts is missing; it must be an RFC 3339 timestamp")
	case w.From == nil || *w.From == "":
		return fail(CodeInvalidEnvelope, "from is missing or empty; it must be your participant id")
	case w.Kind == nil:
		return fail(CodeInvalidEnvelope, "kind is missing; it must be %q", KindMCP)
	case w.Payload == nil || !isObject(w.Payload):
		return fail(CodeInvalidEnvelope, "payload is missing or not a JSON object")
	case w.Seq != nil:
		return fail(CodeInvalidEnvelope, "seq is assigned by the gateway; leave it out")
	}
	e.Protocol, e.TS, e.From, e.Kind = *w.Protocol, *w.TS, *w.From, *w.Kind
	e.Payload = w.Payload
	if w.CorrelationID != nil {
		if *w.CorrelationID == "" || len(*w.CorrelationID) > maxIDBytes {
			return fail(CodeInvalidEnvelope, "correlation_id must be a non-empty id of at most %d bytes", maxIDBytes)
		}
		e.CorrelationID = *w.CorrelationID
	}
	if len(e.TS) > maxTimestampLength {
		return fail(CodeInvalidEnvelope, "ts %.64q is not an RFC 3339 timestamp", e.TS)
	}
	if _, err := time.Parse(time.RFC3339Nano, e.TS); err != nil {
		return fail(CodeInvalidEnvelope, "ts %q is not an RFC 3339 timestamp (e.g. 2025-08-17T14:00:00Z)", e.TS)
	}
	if w.To != nil {
		if len(*w.To) > maxRecipients {
			return fail(CodeInvalidEnvelope, "to names %d recipients; at most %d are allowed", len(*w.To), maxRecipients)
		}
		for _, r := range *w.To {
			if r == "" {
				return fail(CodeInvalidEnvelope, "to contains an empty participant id")
			}
		}
		if len(*w.To) > 0 {
			e.To = *w.To
		}
	}
	switch e.Kind {
	case KindMCP:
	case KindPresence, KindSystem:
		return fail(CodeReservedKind, "kind %q is emitted by the gateway only; participants send kind %q", e.Kind, KindMCP)
	default:
		return fail(CodeInvalidEnvelope, "kind %q is unknown; participants send kind %q", e.Kind, KindMCP)
	}
	class, err := classify(e.Payload)
	if err != nil {
		return fail(CodeInvalidEnvelope, "payload is not a JSON-RPC 2.0 message: %v", err)
	}
	switch {
	case class == ClassRequest && len(e.To) != 1:
		return fail(CodeRequestRecipients, "a request (payload with id and method) must name exactly one recipient in to; it names %d. Broadcast notifications instead, or send one request per peer", len(e.To))
	case class == ClassResponse && e.CorrelationID == "":
		return fail(CodeMissingCorrelation, "a response must set correlation_id to the id of the request envelope")
	}
	return e, class, nil
}

// classify reads the JSON-RPC shape of an MCP payload.
func classify(payload json.RawMessage) (MessageClass, error) {
	var m rpcShape
	if err := json.Unmarshal(payload, &m); err != nil {
		return ClassNone, errors.New(jsonProblem(err))
	}
	if m.JSONRPC != "2.0" {
		return ClassNone, errors.New(`jsonrpc must be "2.0"`)
	}
	hasID := m.ID != nil && !bytes.Equal(m.ID, []byte("null"))
	if hasID {
		switch m.ID[0] {
		case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		default:
			return ClassNone, errors.New("id must be a string or a number")
		}
	}
	switch {
	case m.Method != nil && hasID:
		return ClassRequest, nil
	case m.Method != nil:
		return ClassNotification, nil
	case hasID && (m.Result != nil || m.Error != nil):
		return ClassResponse, nil
	case m.Result != nil || m.Error != nil:
		// JSON-RPC lets an error answer an unparseable request with a null id.
		return ClassResponse, nil
	default:
		return ClassNone, errors.New("it has neither a method nor a result or error")
	}
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

// jsonProblem shortens encoding/json's messages to what a client can act on.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("not valid JSON: %v (at byte %d)", se, se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %q must be %s, not a JSON %s", te.Field, jsonTypeName(te.Type.Kind().String()), te.Value)
		}
		return fmt.Sprintf("must be a JSON object, not a JSON %s", te.Value)
	}
	return err.Error()
}

func jsonTypeName(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "slice":
		return "an array of strings"
	case "ptr":
		return "a value of another type"
	}
	return "a " + goKind
}

// AppendJSON appends the canonical encoding of e to buf: the fields in the
// spec's order, to omitted when empty, payload copied byte for byte, and
// seq last when set. The gateway encodes every envelope it forwards this way,
// once per fan-out, so duplicate or unknown keys a client sent never reach
// other participants.
func (e *Envelope) AppendJSON(buf []byte) []byte {
	buf = append(buf, `{"protocol":`...)
	buf = appendString(buf, e.Protocol)
	buf = append(buf, `,"id":`...)
	buf = appendString(buf, e.ID)
	buf = append(buf, `,"ts":`...)
	buf = appendString(buf, e.TS)
	buf = append(buf, `,"from":`...)
	buf = appendString(buf, e.From)
	if len(e.To) > 0 {
		buf = append(buf, `,"to":[`...)
		for i, t := range e.To {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendString(buf, t)
		}
		buf = append(buf, ']')
	}
	buf = append(buf, `,"kind":`...)
	buf = appendString(buf, e.Kind)
	if e.CorrelationID != "" {
		buf = append(buf, `,"correlation_id":`...)
		buf = appendString(buf, e.CorrelationID)
	}
	buf = append(buf, `,"payload":`...)
	if len(e.Payload) == 0 {
		buf = append(buf, "{}"...)
	} else {
		buf = append(buf, e.Payload...)
	}
	if e.Seq != 0 {
		buf = append(buf, `,"seq":`...)
		buf = strconv.AppendUint(buf, e.Seq, 10)
	}
	return append(buf, '}')
}

// MarshalJSON encodes e as AppendJSON does.
func (e *Envelope) MarshalJSON() ([]byte, error) { return e.AppendJSON(nil), nil }

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does; HTML characters are left alone (they are valid JSON and
// MCP payloads are not HTML).
func appendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		// U+2028 and U+2029 are valid JSON but end lines in JavaScript source.
		if r == '\u2028' || r == '\u2029' {
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

// DecodeDelivered parses a frame a gateway delivered to a participant. It is lenient where
// DecodeEnvelope (for frames participants send) is strict, but it insists
// on what the client relies on.
func DecodeDelivered(data []byte) (*Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("not an envelope: %w", err)
	}
	switch {
	case e.Protocol != Protocol:
		return nil, fmt.Errorf("protocol %q is not %q", e.Protocol, Protocol)
	case e.ID == "" || e.From == "":
		return nil, errors.New("envelope without id or from")
	case e.Kind != KindMCP && e.Kind != KindPresence && e.Kind != KindSystem:
		return nil, fmt.Errorf("unknown kind %q", e.Kind)
	case !isObject(e.Payload):
		return nil, errors.New("payload is not an object")
	}
	return &e, nil
}
