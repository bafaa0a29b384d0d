package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/did"
	"github.com/cvmgo/cvm/didauth"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/internal/httpserve"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/channel"
	"github.com/cvmgo/cvm/payments/quotation"
)

// HTTPEndpointOptions configure ListenHTTP: the gateway's MCP endpoint
// over streamable HTTP with everything in front of it, DIDAuthV1 and
// NIP-10 quotations.
type HTTPEndpointOptions struct {
	// Addr is the TCP address to listen on, e.g. 127.0.0.1:8080 (port 0
	// picks one).
	Addr string
	// Key is the gateway's Nostr key: the endpoint's DID is its did:nostr,
	// which the DID document names and signed requests may be addressed to.
	Key nostr.SecretKey
	// Store keeps the nonces of signed requests (no replay, a restart
	// included) and the quotations (spent once). Default: the store of the
	// gateway's contextvm.Server, so that replicas of a group share both;
	// required with Options.NoNostr.
	Store durable.Store
	// RequireAuth refuses unsigned requests (401).
	RequireAuth bool
	// Allow serves only these callers (keys, npubs, DIDs; did:nostr:<hex>
	// is that key), with 403, and 401 for the unsigned.
	Allow []string
	// AuthWindow bounds how far a signed request's timestamp may be from
	// now, either way (default didauth.DefaultWindow).
	AuthWindow time.Duration
	// AuthCompat also accepts @nuwa-ai/identity-kit's DIDAuthV1 headers.
	AuthCompat bool
	// Processor collects Prices through quotations (nip10/quote,
	// nip10/confirm); without both, nothing is charged over HTTP. Only
	// tools can be priced over HTTP: a price on a prompt or a resource is
	// refused (ErrPriceNotTool) rather than served free.
	Processor payments.Processor
	Prices    []contextvm.Price
	// Channels, when set with Processor and Prices, offers prepaid payment
	// channels over HTTP (quotation.HTTP.Channels): deposits paid through
	// Processor, priced calls paid by receipts signed with the caller's
	// DID key, refunds paid by the books' Refunder. Set it only when the
	// gateway's wallet may pay_invoice.
	Channels *channel.Books
	// InjectCaller tells the upstream who calls (HTTPOptions.InjectCaller).
	InjectCaller bool
	// Logger gets the verifier's and the quotations' logs (default: the
	// gateway's).
	Logger *slog.Logger
}

// ErrPriceNotTool is a price on something other than a tool, which
// quotations cannot collect yet.
var ErrPriceNotTool = errors.New("over HTTP only tools can be priced yet (prompts and resources would be served free)")

// An OptionError is an HTTPEndpointOptions field ListenHTTP refused, so
// that a caller can name it in its own terms (a flag, a setting).
type OptionError struct {
	Field string // "Addr", "Allow" or "Prices"
	Value string // the price, for Prices
	Err   error
}

func (e *OptionError) Error() string {
	if e.Value != "" {
		return e.Field + " " + e.Value + ": " + e.Err.Error()
	}
	return e.Field + ": " + e.Err.Error()
}

func (e *OptionError) Unwrap() error { return e.Err }

// An HTTPEndpoint is the gateway served over MCP streamable HTTP, from
// ListenHTTP until Shutdown.
type HTTPEndpoint struct {
	// URL is the MCP endpoint, http://ADDR/mcp with the address listened
	// on.
	URL string
	// DID is the gateway's DID, did:nostr of its key.
	DID string
	srv *httpserve.Server
}

// Shutdown stops accepting requests and waits, up to ctx, for those being
// served. Close the gateway first: its HTTP sessions end with it.
func (e *HTTPEndpoint) Shutdown(ctx context.Context) error { return e.srv.Shutdown(ctx) }

// ListenHTTP serves the gateway over MCP streamable HTTP on opts.Addr: its
// MCP endpoint (HTTPHandler) at MCPPath behind a didauth.Verifier and, with
// prices, a quotation desk (package quotation), and its DID document at
// DIDDocumentPath. Signed requests must be addressed to the endpoint's URL
// (by the address listened on, or by opts.Addr when it names a host and a
// port) or to the gateway's DID.
func (g *Gateway) ListenHTTP(opts HTTPEndpointOptions) (*HTTPEndpoint, error) {
	log := opts.Logger
	if log == nil {
		log = g.opts.Logger
	}
	store := opts.Store
	if store == nil && g.srv != nil {
		store = g.srv.State()
	}
	pay, err := httpQuotations(store, opts.Processor, opts.Prices, opts.Channels, log)
	if err != nil {
		return nil, err
	}
	// The listener starts before the handler exists, since the handler's
	// DID document names the listener's address (port 0 picks one).
	h := &deferredHandler{}
	hs, err := httpserve.Listen(opts.Addr, h, nil)
	if err != nil {
		return nil, &OptionError{Field: "Addr", Err: err}
	}
	e := &HTTPEndpoint{URL: "http://" + hs.Addr.String() + MCPPath, DID: did.NostrDID(opts.Key.Public()), srv: hs}
	audiences := []string{e.URL, e.DID}
	if host, port, err := net.SplitHostPort(opts.Addr); err == nil && host != "" && port != "0" {
		audiences = append(audiences, "http://"+opts.Addr+MCPPath)
	}
	v, err := didauth.NewVerifier(didauth.Options{Store: store, RequireAuth: opts.RequireAuth, Allow: opts.Allow,
		Audiences: audiences, Window: opts.AuthWindow, Compat: opts.AuthCompat, Logger: log})
	if err != nil {
		hs.Shutdown(context.Background())
		return nil, &OptionError{Field: "Allow", Err: err}
	}
	doc, err := json.Marshal(did.ServerDocument("", did.NostrSigner(opts.Key), e.URL))
	if err != nil {
		hs.Shutdown(context.Background())
		return nil, err
	}
	h.set(g.HTTPHandler(HTTPOptions{Auth: v.Middleware, Caller: didauth.Caller, Payments: pay,
		InjectCaller: opts.InjectCaller, DIDDocument: doc}))
	return e, nil
}

// httpQuotations is the quotation desk collecting the tools' prices with
// the processor, or nil when nothing is charged.
func httpQuotations(store durable.Store, proc payments.Processor, prices []contextvm.Price, books *channel.Books, log *slog.Logger) (HTTPPayments, error) {
	if proc == nil || len(prices) == 0 {
		return nil, nil
	}
	caps := map[string]payments.Cap{}
	for _, p := range prices {
		if p.Kind() != "tool" {
			return nil, &OptionError{Field: "Prices", Value: p.Capability, Err: ErrPriceNotTool}
		}
		lo, hi, err := p.Range()
		if err != nil {
			return nil, &OptionError{Field: "Prices", Value: p.Capability, Err: err}
		}
		unit := p.Unit
		if unit == "" {
			unit = contextvm.DefaultPriceUnit
		}
		caps[p.Name()] = payments.Cap{Capability: p.Capability, Low: lo, High: hi, Unit: unit}
	}
	desk, err := quotation.New(quotation.Options{Store: store, Processor: proc, Prices: caps, Logger: log})
	if err != nil {
		return nil, err
	}
	return quotation.HTTP{Desk: desk, Caller: didauth.Caller, Channels: books, CallerKey: didauth.CallerKey}, nil
}

// deferredHandler serves 503 until set.
type deferredHandler struct{ h atomic.Pointer[http.Handler] }

func (d *deferredHandler) set(h http.Handler) { d.h.Store(&h) }

func (d *deferredHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := d.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	WriteHTTPError(w, http.StatusServiceUnavailable, "starting", "the gateway is starting; retry shortly")
}
