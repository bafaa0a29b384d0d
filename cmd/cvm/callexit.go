package main

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Exit statuses of cvm call, which tell a script what went wrong; the
// other commands exit with exitOK, exitRemote or exitLocal.
const (
	exitToolError = exitRemote // the tool's result says isError
	exitUsage     = exitLocal  // a usage error, or a local failure
	exitProtocol  = 3          // the server answered with a JSON-RPC error
	exitTransport = 4          // the call got no answer: no relay, no server, a timeout
	exitPayment   = 5          // the call was not paid for, or its payment failed
	exitNoMatch   = 6          // --extract PATH selects nothing in the result
)

// exitCodesHelp is the table of cvm call's exit statuses, for its help.
const exitCodesHelp = `Exit status:
  0  the tool answered
  1  the tool reported an error (isError); its result is printed as asked
  2  a usage error (flags, arguments, PATH) or a local failure
  3  the server answered with a JSON-RPC error, or the call cannot be made
     there: no such tool; with --schema, no trusted server announces it
  4  no answer: no relay answered, the server did not answer in time
     (--timeout) or could not be reached, or cvm was stopped while it waited
  5  not paid: refused within --max-sats, the daily limits, payments.allow
     or at the prompt, or the payment failed or was rejected
  6  --extract PATH selects nothing in the result (nothing is printed)`

// exitError is an error with the exit status it ends the command with.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// withExit gives err the exit status code; nil stays nil.
func withExit(code int, err error) error {
	if err == nil {
		return nil
	}
	return exitError{code, err}
}

// exitStatus is the status a command that failed with err exits with.
func exitStatus(err error) int {
	var ee exitError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, new(remoteError)):
		return exitRemote
	}
	return exitLocal
}

// classifyCall gives the error cvm call ended with its exit status, from
// what the error says happened; ctx is the command's, done when a signal
// stopped it.
func classifyCall(ctx context.Context, err error) error {
	if err == nil || errors.As(err, new(exitError)) {
		return err
	}
	return withExit(callExitCode(ctx, err), err)
}

func callExitCode(ctx context.Context, err error) int {
	var werr *jsonrpc.Error
	switch {
	case errors.As(err, new(noMatchError)):
		return exitNoMatch
	case errors.Is(err, errNoRelay):
		return exitTransport
	case !errors.As(err, new(remoteError)) && !errors.As(err, &werr):
		return exitUsage
	case ctx.Err() != nil, unreachable(err):
		// Before the JSON-RPC code: the go-sdk's HTTP client marks a
		// request it could not send with one of its own (-32005).
		return exitTransport
	case errors.As(err, &werr):
		return rpcExitCode(werr)
	}
	return exitProtocol
}

// rpcExitCode is the exit status of a call answered with werr. The
// client transport answers for itself when the server does not: a
// timeout, and its own delivery failures, which it gives JSON-RPC's
// internal error code with messages of its own ("contextvm: …").
func rpcExitCode(werr *jsonrpc.Error) int {
	switch werr.Code {
	case contextvm.CodeRequestTimeout:
		return exitTransport
	case contextvm.CodeTransportError:
		if strings.HasPrefix(werr.Message, "contextvm: ") {
			return exitTransport
		}
	case contextvm.CodePaymentDeclined, contextvm.CodePaymentRejected, contextvm.CodePaidResultLost,
		contextvm.CodePriceRefused, contextvm.CodePaymentPending:
		return exitPayment
	case contextvm.CodePaymentRequired:
		if _, ok := contextvm.IsPaymentRequired(werr); ok {
			return exitPayment
		}
	}
	return exitProtocol
}

// unreachable reports whether err is the connection's failure rather
// than an answer: a network error, a connection closed.
func unreachable(err error) bool {
	var nerr net.Error
	return errors.As(err, &nerr) || errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.DeadlineExceeded)
}
