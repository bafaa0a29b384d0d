package contextvm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// ErrUnauthorized is what an Authorize hook returns, wrapped, to refuse.
var ErrUnauthorized = errors.New("unauthorized")

// Capability names a method, and optionally the tool, prompt or resource it
// acts on, for PublicCapabilities.
type Capability struct {
	Method string // e.g. "tools/list", "tools/call"
	Name   string // tool or prompt name, or resource URI; empty matches all
}

// ParseCapability reads "METHOD" or "METHOD:NAME", as in --public tools/call:echo.
func ParseCapability(s string) (Capability, error) {
	// Method names have no colon; resource URIs do, so cut at the first.
	method, name, _ := strings.Cut(s, ":")
	if method == "" {
		return Capability{}, fmt.Errorf("capability %q: want METHOD or METHOD:NAME, e.g. tools/list or tools/call:echo", s)
	}
	return Capability{Method: method, Name: name}, nil
}

// Authorizer decides whether a client may make a request. It is called for
// every request and notification after the allow-list; a non-nil error
// refuses the request with CodeUnauthorized and the error's text. It must be
// safe for concurrent use.
type Authorizer func(ctx context.Context, client nostr.PubKey, req *jsonrpc.Request) error

// authorization applies ServerOptions.AllowedClients, PublicCapabilities and
// Authorize.
type authorization struct {
	allowed map[nostr.PubKey]bool // nil: everyone
	public  []Capability
	hook    Authorizer
}

func newAuthorization(opts ServerOptions) authorization {
	a := authorization{public: opts.PublicCapabilities, hook: opts.Authorize}
	if len(opts.AllowedClients) > 0 {
		a.allowed = make(map[nostr.PubKey]bool, len(opts.AllowedClients))
		for _, pk := range opts.AllowedClients {
			a.allowed[pk] = true
		}
	}
	return a
}

// serves reports whether the server serves client at all (it is allowed,
// or there is no allow-list).
func (a authorization) serves(client nostr.PubKey) bool {
	return a.allowed == nil || a.allowed[client]
}

// known reports whether client is named by AllowedClients: its session is
// never displaced by a client that is not.
func (a authorization) known(client nostr.PubKey) bool {
	return a.allowed[client]
}

// transferClass says what a peer may send as CEP-22 fragments. A start
// frame names no method, so it cannot be authorized like a request; the
// budget it may use follows from whether the server serves the peer.
func (a authorization) transferClass(peer nostr.PubKey) peerClass {
	switch {
	case a.allowed == nil || a.allowed[peer]:
		return peerTrusted
	case len(a.public) > 0:
		return peerStranger
	default:
		return peerRefused
	}
}

// check returns nil if client may send req.
func (a authorization) check(ctx context.Context, client nostr.PubKey, req *jsonrpc.Request) error {
	if a.allowed != nil && !a.allowed[client] && !a.isPublic(req) {
		what := req.Method
		if name := capabilityName(req); name != "" {
			what += " " + name
		}
		return fmt.Errorf("%w: %s may not call %s on this server", ErrUnauthorized, nostrx.EncodeNpub(client), what)
	}
	if a.hook != nil {
		if err := a.hook(ctx, client, req); err != nil {
			if !errors.Is(err, ErrUnauthorized) {
				err = fmt.Errorf("%w: %v", ErrUnauthorized, err)
			}
			return err
		}
	}
	return nil
}

// isPublic reports whether req is open to everyone. The handshake and
// housekeeping are, as soon as anything is: a client must be able to
// initialize to reach the public capabilities.
func (a authorization) isPublic(req *jsonrpc.Request) bool {
	if len(a.public) == 0 {
		return false
	}
	switch req.Method {
	case mcpmsg.MethodInitialize, mcpmsg.MethodInitialized, mcpmsg.MethodPing, mcpmsg.MethodCancelled, mcpmsg.MethodShutdown,
		mcpmsg.MethodProgress: // CEP-22 frames of a (still authorized) request

		return true
	}
	name := capabilityName(req)
	return slices.ContainsFunc(a.public, func(c Capability) bool {
		return c.Method == req.Method && (c.Name == "" || c.Name == name)
	})
}

// capabilityName is the tool or prompt name, or resource URI, a request acts on.
func capabilityName(req *jsonrpc.Request) string {
	if name := mcpmsg.StringParam(req.Params, "name"); name != "" {
		return name
	}
	return mcpmsg.StringParam(req.Params, "uri")
}
