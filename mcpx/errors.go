package mcpx

import (
	"fmt"
)

// EnvelopeError is why a frame was refused. EnvelopeID is the refused
// envelope's id when it could be read, so the error envelope can carry it as
// correlation_id.
type EnvelopeError struct {
	Code       Code
	EnvelopeID string
	Message    string
}

func (e *EnvelopeError) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }
