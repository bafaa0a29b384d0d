package room

import (
	"encoding/json"
	"time"

	"github.com/cvmgo/cvm/mcpx"
)

// gatewayEnvelope builds an envelope from the gateway. payload must marshal.
func gatewayEnvelope(now time.Time, kind string, to []string, correlation string, payload any) *mcpx.Envelope {
	p, err := json.Marshal(payload)
	if err != nil {
		panic("mcpx: gateway payload does not marshal: " + err.Error()) // a programming error
	}
	return &mcpx.Envelope{
		Protocol:      mcpx.Protocol,
		ID:            mcpx.NewEnvelopeID(),
		TS:            now.UTC().Format(mcpx.TimeLayout),
		From:          mcpx.GatewayID,
		To:            to,
		Kind:          kind,
		CorrelationID: correlation,
		Payload:       p,
	}
}

// errorEnvelope is the reply to a refused frame: kind system, addressed to
// the sender only, correlated with the offending envelope when its id is
// known.
func errorEnvelope(now time.Time, to string, code mcpx.Code, correlation, message string, retryAfter time.Duration) *mcpx.Envelope {
	p := mcpx.ErrorPayload{Event: "error", Type: "error", Code: code, Message: message}
	if retryAfter > 0 {
		p.RetryAfterMS = retryAfter.Milliseconds()
		if p.RetryAfterMS == 0 {
			p.RetryAfterMS = 1
		}
	}
	return gatewayEnvelope(now, mcpx.KindSystem, []string{to}, correlation, p)
}

// PresenceEnvelope is the gateway's presence envelope for participant p:
// event is mcpx.PresenceJoin, PresenceLeave (with its reason) or
// PresenceHeartbeat. A Backend publishes the leaves it decides on with it.
func PresenceEnvelope(now time.Time, event string, p mcpx.Participant, reason mcpx.LeaveReason) *mcpx.Envelope {
	return gatewayEnvelope(now, mcpx.KindPresence, nil, "", mcpx.Presence{Event: event, Participant: p, Reason: reason})
}
