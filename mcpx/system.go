package mcpx

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Participant is a topic member as presence, the welcome and the
// participants endpoint describe it. Its fields come from the token.
type Participant struct {
	ID   string  `json:"id"`
	Name string  `json:"name"`
	Kind string  `json:"kind"`
	MCP  MCPInfo `json:"mcp"`
}

// MCPInfo is the MCP version a participant speaks.
type MCPInfo struct {
	Version string `json:"version"`
}

// DefaultMCPVersion is announced for participants whose token names none.
const DefaultMCPVersion = "2025-06-18"

// Participant kinds.
const (
	ParticipantHuman = "human"
	ParticipantAgent = "agent"
	ParticipantRobot = "robot"
)

// Presence events. Leave carries an extra reason (see LeaveReason).
const (
	PresenceJoin      = "join"
	PresenceLeave     = "leave"
	PresenceHeartbeat = "heartbeat"
)

// LeaveReason says why a participant left; it is an extra field of the
// leave payload, ignored by v0 clients.
type LeaveReason string

const (
	LeaveClosed       LeaveReason = "closed"        // the client closed or the socket failed
	LeaveTimeout      LeaveReason = "timeout"       // no pong in time: the peer is gone
	LeaveReplaced     LeaveReason = "replaced"      // a new connection took the participant id
	LeaveSlowConsumer LeaveReason = "slow_consumer" // the client stopped reading; its queue filled
	LeaveShutdown     LeaveReason = "shutdown"      // the gateway is stopping
)

type presencePayload struct {
	Event       string      `json:"event"`
	Participant Participant `json:"participant"`
	Reason      LeaveReason `json:"reason,omitempty"`
}

// errorPayload is the body of a gateway error envelope. Type duplicates
// Event for the reference client, whose types expect payload.type.
type errorPayload struct {
	Event        string `json:"event"`
	Type         string `json:"type"`
	Code         Code   `json:"code"`
	Message      string `json:"message"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
}

// specWelcome is the welcome of the v0 spec (§5.3).
type specWelcome struct {
	Event        string        `json:"event"`
	Participant  Participant   `json:"participant"`
	Participants []Participant `json:"participants"`
	History      historyInfo   `json:"history"`
	Protocol     string        `json:"protocol"`
}

type historyInfo struct {
	Enabled bool `json:"enabled"`
	// Limit is the largest page the history endpoint returns.
	Limit int `json:"limit"`
	// LatestSeq is the topic's newest sequence number when the welcome was
	// sent: history after it arrives live. An extra field.
	LatestSeq uint64 `json:"latest_seq"`
}

// referenceWelcome is the welcome the reference gateway sends
// (notes §3.2): payload.type, participant_id, topic and the history tail.
type referenceWelcome struct {
	Type          string            `json:"type"`
	ParticipantID string            `json:"participant_id"`
	Topic         string            `json:"topic"`
	Participants  []Participant     `json:"participants"`
	History       []json.RawMessage `json:"history"`
}

// newEnvelopeID returns a random UUIDv4 for gateway-emitted envelopes.
func newEnvelopeID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

// gatewayEnvelope builds an envelope from the gateway. payload must marshal.
func gatewayEnvelope(now time.Time, kind string, to []string, correlation string, payload any) *Envelope {
	p, err := json.Marshal(payload)
	if err != nil {
		panic("mcpx: gateway payload does not marshal: " + err.Error()) // a programming error
	}
	return &Envelope{
		Protocol:      Protocol,
		ID:            newEnvelopeID(),
		TS:            now.UTC().Format(tsLayout),
		From:          GatewayID,
		To:            to,
		Kind:          kind,
		CorrelationID: correlation,
		Payload:       p,
	}
}

// errorEnvelope is the reply to a refused frame: kind system, addressed to
// the sender only, correlated with the offending envelope when its id is
// known.
func errorEnvelope(now time.Time, to string, code Code, correlation, message string, retryAfter time.Duration) *Envelope {
	p := errorPayload{Event: "error", Type: "error", Code: code, Message: message}
	if retryAfter > 0 {
		p.RetryAfterMS = retryAfter.Milliseconds()
		if p.RetryAfterMS == 0 {
			p.RetryAfterMS = 1
		}
	}
	return gatewayEnvelope(now, KindSystem, []string{to}, correlation, p)
}

func presenceEnvelope(now time.Time, event string, p Participant, reason LeaveReason) *Envelope {
	return gatewayEnvelope(now, KindPresence, nil, "", presencePayload{Event: event, Participant: p, Reason: reason})
}

// tsLayout is RFC 3339 with milliseconds, as JavaScript's toISOString writes
// it (and so the reference gateway).
const tsLayout = "2006-01-02T15:04:05.000Z07:00"
