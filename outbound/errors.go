package outbound

import "errors"

// Why a fetch was refused or failed. Every error a Fetcher returns wraps
// exactly one of these (or the caller's own context error), so callers
// decide with errors.Is and never read the text.
var (
	// ErrBadURL: not an absolute URL with a host, or longer than MaxURLLength.
	ErrBadURL = errors.New("outbound: not a URL cvm fetches")
	// ErrScheme: a scheme other than http and https, http where the request
	// wants HTTPS only, or a redirect from https to http.
	ErrScheme = errors.New("outbound: scheme not fetched")
	// ErrCredentials: the URL carries a user name or password, which a
	// stranger's data has no business making cvm send anywhere.
	ErrCredentials = errors.New("outbound: URL with credentials")
	// ErrNotPublic: the address dialled (after DNS, on every hop) is
	// loopback, private, link-local or otherwise not on the public
	// Internet, and not on Options.Allow.
	ErrNotPublic = errors.New("outbound: address is not public")
	// ErrRedirected: the server answered with a redirect, and the request
	// does not follow them.
	ErrRedirected = errors.New("outbound: redirect not followed")
	// ErrTooManyRedirects: more redirects than Options.MaxRedirects.
	ErrTooManyRedirects = errors.New("outbound: too many redirects")
	// ErrRedirectLoop: a redirect back to a URL already requested.
	ErrRedirectLoop = errors.New("outbound: redirect loop")
	// ErrStatus: the final answer's status is not 200 OK.
	ErrStatus = errors.New("outbound: status not 200")
	// ErrContentType: the body is not of a type the request accepts, as
	// declared by the server or (GetImage) as its bytes show.
	ErrContentType = errors.New("outbound: content type not accepted")
	// ErrTooLarge: the body is longer than the request's limit.
	ErrTooLarge = errors.New("outbound: body too large")
	// ErrTimeout: the fetch, redirects and body included, took longer than
	// Options.Timeout.
	ErrTimeout = errors.New("outbound: timed out")
	// ErrBadBody: GetJSON's body does not decode.
	ErrBadBody = errors.New("outbound: body does not decode")
)
