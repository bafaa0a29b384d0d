package mcpx

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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

// Presence is the payload of a presence envelope.
type Presence struct {
	Event       string      `json:"event"`
	Participant Participant `json:"participant"`
	Reason      LeaveReason `json:"reason,omitempty"`
}

// ErrorPayload is the body of a gateway error envelope. Type duplicates
// Event for the reference client, whose types expect payload.type.
type ErrorPayload struct {
	Event        string `json:"event"`
	Type         string `json:"type"`
	Code         Code   `json:"code"`
	Message      string `json:"message"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
}

// Welcome is the welcome of the v0 spec (§5.3).
type Welcome struct {
	Event        string        `json:"event"`
	Participant  Participant   `json:"participant"`
	Participants []Participant `json:"participants"`
	History      HistoryInfo   `json:"history"`
	Protocol     string        `json:"protocol"`
}

// HistoryInfo says in the welcome whether the topic keeps history.
type HistoryInfo struct {
	Enabled bool `json:"enabled"`
	// Limit is the largest page the history endpoint returns.
	Limit int `json:"limit"`
	// LatestSeq is the topic's newest sequence number when the welcome was
	// sent: history after it arrives live. An extra field.
	LatestSeq uint64 `json:"latest_seq"`
}

// ReferenceWelcome is the welcome the reference gateway sends
// (notes §3.2): payload.type, participant_id, topic and the history tail.
type ReferenceWelcome struct {
	Type          string            `json:"type"`
	ParticipantID string            `json:"participant_id"`
	Topic         string            `json:"topic"`
	Participants  []Participant     `json:"participants"`
	History       []json.RawMessage `json:"history"`
}

// NewEnvelopeID returns a random UUIDv4, the form of every envelope id
// cvm writes.
func NewEnvelopeID() string {
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

// TimeLayout is RFC 3339 with milliseconds, as JavaScript's toISOString writes
// it (and so the reference gateway).
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"
