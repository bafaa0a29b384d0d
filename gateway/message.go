package gateway

import (
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/mcpmux"
)

// JSON-RPC error codes the gateway answers with on its own. They belong to
// ContextVM's table (contextvm/codes.go, docs/error-codes.md).
const (
	// CodeUpstreamUnavailable answers a request the upstream cannot take:
	// it could not be started, it died with the request in flight, or it is
	// being restarted. JSON-RPC's internal error: from the client's side,
	// the server failed.
	CodeUpstreamUnavailable = mcpmux.CodeUpstreamUnavailable
	// CodeBusy answers an initialize beyond MaxSessions when every session
	// has work in flight: retry later. It is contextvm.CodeServerBusy, so
	// that a client tells it from a refusal (contextvm.CodeUnauthorized).
	CodeBusy = contextvm.CodeServerBusy
)
