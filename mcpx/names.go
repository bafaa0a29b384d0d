package mcpx

import (
	"fmt"
	"strings"
)

// ValidateTopic checks a topic name: 1 to 128 bytes of letters, digits and
// . _ - : @ + ~ (so it fits a URL path segment and a NATS subject token
// once '.' is escaped).
func ValidateTopic(t string) error {
	return validateName("topic", t)
}

// ValidateParticipantID checks a participant id: the same characters as a
// topic, and not in the gateway's "system:" namespace.
func ValidateParticipantID(id string) error {
	if strings.HasPrefix(id, "system:") {
		return fmt.Errorf("participant id %q: the system: prefix is reserved for the gateway", id)
	}
	return validateName("participant id", id)
}

func validateName(what, s string) error {
	if s == "" || len(s) > maxParticipantID {
		return fmt.Errorf("%s must be 1 to %d bytes", what, maxParticipantID)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("._-:@+~", c) >= 0:
		default:
			return fmt.Errorf("%s %q: only letters, digits and . _ - : @ + ~ are allowed", what, s)
		}
	}
	return nil
}
