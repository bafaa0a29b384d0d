package room

import (
	"errors"
	"fmt"
)

// Sentinel errors of the room gateway, matched with errors.Is.
var (
	// ErrClosed is returned by operations on a closed Gateway, Store or Broker.
	ErrClosed = errors.New("mcpx room: closed")
	// ErrTokenInvalid wraps every reason a token is refused (signature,
	// algorithm, format, expiry, audience).
	ErrTokenInvalid = errors.New("mcpx room: invalid token")
	// ErrTokenExpired is a token past its exp (it also matches ErrTokenInvalid).
	ErrTokenExpired = fmt.Errorf("%w: expired", ErrTokenInvalid)
)
