package cep8

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/channel"
	"github.com/gowebpki/jcs"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Options make a Gate collect the prices in ServerOptions.Prices (CEP-8)
// instead of only advertising them. A request for a priced
// capability (tools/call, prompts/get, resources/read) reaches the MCP
// handler only once its payment is verified, and each request event is
// charged at most once: a replayed event (through another relay, or after
// a restart) is never run again, and is answered from the stored result.
//
// Transparent (the default, what the reference SDK does): the server
// sends notifications/payment_required, correlated by the request's event
// id, waits for the payment, sends notifications/payment_accepted and then
// the result, or notifications/payment_rejected and an error
// (CodePaymentRejected). Explicit gating, for a client that opts in with
// ["payment_interaction","explicit_gating"]: the request is answered with
// CodePaymentRequired and data.payment_options; the client pays and sends
// the same request again, which runs once per payment. Sent again before
// the payment is seen, by any process of the same client, it is the same
// invocation (CEP-8's grant key) and is offered the same payment request;
// once the payment is seen, and while it is verified, it is answered
// CodePaymentPending.
//
// Once a payment is verified the charge stands: if the MCP handler fails,
// times out or the client cancels, the client paid. The answer of a paid
// request is kept in the server's State for the freshness window, and the
// same request event arriving again is answered from it. After a crash
// during the call, the replay is answered with CodePaidResultLost.
//
// A payment request is recorded in the server's State before the client
// learns of it. If the server restarts before the payment is verified, the
// same request event replayed (transparent) or the same request sent again
// (explicit gating) after the restart has that payment request verified
// rather than a new one issued: a client that paid meanwhile is credited
// once and its request runs once.
type Options struct {
	// Pricer says what each priced request costs (payments.Announced when
	// nil: the announced amount). Its price must fall inside the announced
	// one; a price outside it is never charged.
	Pricer payments.Pricer
	// Processors are the payment methods accepted; the first one issues
	// payment requests. At least one is required, unless a Redeemer asks
	// for payments (payments.Requirer).
	Processors []payments.Processor
	// Redeemers take direct payments (CEP-8's direct_payment tag; see
	// direct.go): a bearer asset carried in the request, redeemed before
	// it runs, what it was worth above the price returned as change on
	// payment_accepted. Their PMIs join the pmi tags. A payment they
	// reject goes on in the normal flow, with the Processors; with none, a
	// Redeemer that is a payments.Requirer asks for a direct payment in
	// payment_required, which the client answers by sending the request
	// again with it.
	Redeemers []payments.Redeemer
	// VerifyTimeout bounds the wait for a payment (default 5 min; never
	// more than a second past the payment request's own ttl, which is
	// whole seconds: the processor says when the request expired).
	VerifyTimeout time.Duration
	// NoExplicitGating refuses clients that ask for explicit gating
	// (-32602) instead of serving them that way.
	NoExplicitGating bool
	// Rates converts prices announced in usd into sats when a payment is
	// asked for (payments.Cap.InSats: rounded up to a whole sat): the
	// payment request, a channel receipt's cost, every rail states sats.
	// Without it, or when it fails, a usd-priced request is answered
	// CodePriceRefused and nothing runs.
	Rates payments.Rates
	// Channels, when set, offers prepaid payment channels (channel.PMI
	// among the pmi tags; see channel.go): a priced request with a channel
	// receipt runs once the books accept it, with no invoice. Its
	// ServerKey must be the server's public key, and its Refunder pays
	// refunds from the server's wallet (channel.WalletRefunder). The
	// first Processor must be Lightning's: it takes the deposits.
	Channels *channel.Books
}

// Durable spaces of the gate.
const (
	chargeSpace     = "contextvm.charges"
	resultSpace     = "contextvm.results"
	grantSpace      = "contextvm.grants"
	grantUsedSpace  = "contextvm.grants.used"
	issuedSpace     = "contextvm.issued"        // transparent: payment requests issued, by route key
	paidRunSpace    = "contextvm.charges.run"   // paid requests claimed for running, by route key
	grantIssueSpace = "contextvm.grants.issued" // explicit gating: payment requests issued, by grant key
	defaultVerify   = 5 * time.Minute
	pendingRetrySec = 1
)

// A Gate collects payments in front of a Server's MCP handler: give it as
// ServerOptions.Gate, to one server only.
type Gate struct {
	h      *contextvm.Host
	log    *slog.Logger
	state  durable.Store // the server's State
	window time.Duration // the server's freshness window
	opts   Options
	prices map[string]payments.Cap
	procs  map[string]payments.Processor

	redeemers  map[string]payments.Redeemer
	owedMu     sync.Mutex // serializes changes to the change owed to clients
	delivering sync.Map   // clients (nostr.PubKey) owed change being sent it now

	running sync.Map // route keys (strings) of paid requests running in this process

	mu      sync.Mutex
	pending map[string]*grant // explicit gating: payments issued, by grant key
	// verifying holds, by route key, the transparent payments this
	// process verifies: the function that withdraws the request while it
	// waits for its payment, nil once the wait is over.
	verifying map[string]context.CancelCauseFunc
}

// errWithdrawn ends the wait for a payment the client cancelled the
// request of (notifications/cancelled: a cvm client sends it when it
// declines to pay).
var errWithdrawn = errors.New("the client withdrew the request")

// finalCheck bounds the last look at a withdrawn request's payment: a
// payment that raced the cancel is still credited and the request run.
const finalCheck = 2 * time.Second

// issuedRecord is a payment request issued and not yet verified, kept in
// the server's State before the client learns of it, so that a payment
// made while the server restarts is still credited.
type issuedRecord struct {
	Charge payments.Charge          `json:"charge"`
	Req    payments.PaymentRequired `json:"req"`
	// Event and Wrap are the request, kept by a replica (ServerOptions.
	// Replicas) for a survivor of its death to take up: the wait for
	// this payment, then the call (see adopt).
	Event *nostr.Event `json:"event,omitempty"`
	Wrap  nostr.Kind   `json:"wrap,omitempty"`
	// Fund is the channel the payment opens or tops up, if it does.
	Fund *funding `json:"channel,omitempty"`
}

// grant is an explicit-gating payment under way: issued, and neither
// recorded as a grant nor failed yet. Its fields but done are guarded by
// Gate.mu.
type grant struct {
	req    payments.PaymentRequired
	charge payments.Charge
	failed error
	// seen: the payment was seen (a look on a request sent again found it
	// paid, or Verify returned), and is being verified and recorded.
	seen bool
	// lookedAt is when a request sent again last made a look at the
	// payment (payments.Checker); see lookInterval.
	lookedAt time.Time
	// wake ends the verifier's current wait, for it to look again at once.
	wake context.CancelCauseFunc
	done chan struct{} // closed once the grant is recorded or has failed
}

func newGrant(req payments.PaymentRequired, charge payments.Charge) *grant {
	return &grant{req: req, charge: charge, done: make(chan struct{})}
}

// errLookAgain wakes a grant's verifier: the payment was seen.
var errLookAgain = errors.New("the payment was seen: look again")

// seenWait bounds how long a request sent again, whose payment was just
// seen, waits for its grant to be verified and recorded before it is
// answered CodePaymentPending: about one wallet lookup over a relay, so
// that the paid request usually runs at once rather than after another
// round trip and retry_after.
const seenWait = time.Second

// lookTimeout bounds the one look at a payment (payments.Checker) made
// for a request sent again; a wallet slower than that is taken as not paid
// yet, and the same payment request offered again.
const lookTimeout = 2 * time.Second

// lookInterval spaces the looks that requests sent again make at one
// grant's payment: each look is a wallet request (lookup_invoice), and a
// client repeating its request in a loop must not turn into a stream of
// them. A repeat within the interval waits for the next look (a client
// that has just paid is answered at most this much later); a repeat while
// another already waits for it is offered the payment request again
// without a look, and the grant's verifier keeps polling meanwhile.
const lookInterval = time.Second

type chargeRecord struct {
	ID     json.RawMessage `json:"id"`
	Amount int64           `json:"amount"`
	Unit   string          `json:"unit"`
	PMI    string          `json:"pmi"`
}

// NewGate makes a gate that collects payments as opts says, once a
// server has attached it (ServerOptions.Gate).
func NewGate(opts Options) *Gate {
	if opts.VerifyTimeout <= 0 {
		opts.VerifyTimeout = defaultVerify
	}
	return &Gate{opts: opts}
}

// Attach readies the gate for the server of h: the prices it collects are
// the server's (ServerOptions.Prices).
func (g *Gate) Attach(h *contextvm.Host) error {
	if g.h != nil {
		return errors.New("cep8: a Gate serves one server")
	}
	if err := g.init(h.Prices(), h.State(), h.Freshness(), h.Logger()); err != nil {
		return err
	}
	g.h = h
	return nil
}

// init readies the gate to collect prices, keeping its records in state
// for the freshness window.
func (g *Gate) init(prices []contextvm.Price, state durable.Store, window time.Duration, log *slog.Logger) error {
	opts := g.opts
	asks := slices.ContainsFunc(opts.Redeemers, func(r payments.Redeemer) bool { _, ok := r.(payments.Requirer); return ok })
	if len(opts.Processors) == 0 && !asks {
		return errors.New("contextvm: PaymentOptions needs at least one Processor, or a Redeemer that is a payments.Requirer")
	}
	g.state, g.window, g.log = state, window, log
	g.prices, g.procs = map[string]payments.Cap{}, map[string]payments.Processor{}
	g.pending, g.verifying = map[string]*grant{}, map[string]context.CancelCauseFunc{}
	g.redeemers = map[string]payments.Redeemer{}
	for _, p := range opts.Processors {
		g.procs[p.PMI()] = p
	}
	for _, r := range opts.Redeemers {
		g.redeemers[r.PMI()] = r
	}
	if opts.Channels != nil && (len(opts.Processors) == 0 || opts.Processors[0].PMI() != payments.PMILightningBolt11) {
		return errors.New("cep8: channels take their deposits over Lightning: the first processor must be Lightning's")
	}
	for _, p := range prices {
		lo, hi, err := p.Range()
		if err != nil {
			return fmt.Errorf("contextvm: price of %s: %w", p.Capability, err)
		}
		unit := p.Unit
		if unit == "" {
			unit = contextvm.DefaultPriceUnit
		}
		g.prices[p.Capability] = payments.Cap{Capability: p.Capability, Low: lo, High: hi, Unit: unit}
	}
	return nil
}

// Tags are the pmi tags of the processors, for the announcement and the
// discovery tags.
func (g *Gate) Tags() nostr.Tags {
	tags := make(nostr.Tags, 0, len(g.opts.Processors)+len(g.opts.Redeemers))
	for _, p := range g.opts.Processors {
		tags = append(tags, nostr.Tag{contextvm.TagPMI, p.PMI()})
	}
	for _, r := range g.opts.Redeemers {
		tags = append(tags, nostr.Tag{contextvm.TagPMI, r.PMI()})
	}
	if g.opts.Channels != nil {
		tags = append(tags, nostr.Tag{contextvm.TagPMI, channel.PMI})
	}
	return tags
}

// priced returns the announced price of m, if it has one.
func (g *Gate) priced(m *jsonrpc.Request) (payments.Cap, bool) {
	capability, ok := contextvm.PricedCapability(m)
	if !ok {
		return payments.Cap{}, false
	}
	c, ok := g.prices[capability]
	return c, ok
}

// admit takes a priced request in place of its delivery to the MCP
// handler: the payment is collected on a goroutine of the session, and the
// request run once paid.
func (g *Gate) admit(call *contextvm.Call, explicit bool, price payments.Cap) {
	m, key := call.Request(), call.Key()
	call.Go(func(ctx context.Context) {
		if !explicit {
			if rec, ok := g.issued(ctx, issuedSpace, key); ok {
				// A replay, after a restart, of a request whose payment
				// was asked for: that payment, not a new one.
				g.transparent(ctx, call, rec.Charge, &rec.Req, rec.Fund)
				return
			}
		}
		announced := price
		price, err := announced.InSats(ctx, g.opts.Rates)
		if err != nil {
			g.log.Warn("refusing a usd-priced request: no usd rate", "client", call.Client().Hex(), "capability", announced.Capability, "err", err)
			g.unusedDirect(ctx, call, "the server has no usd rate now")
			// The rate source's error stays in the log: its URL may
			// carry the operator's API key.
			call.Answer(ctx, &jsonrpc.Error{Code: contextvm.CodePriceRefused, Message: fmt.Sprintf(
				"%s is priced in usd, and the server has no usd rate to convert it into sats now; nothing was charged", announced.Capability)})
			return
		}
		charge := payments.Charge{Unit: price.Unit, Description: price.Capability, RequestID: call.Event().ID.Hex(), Client: call.Client().Hex()}
		quote, err := payments.Resolve(ctx, g.opts.Pricer, payments.PriceRequest{Cap: price, Method: m.Method, Params: m.Params,
			Client: charge.Client, RequestID: charge.RequestID})
		if err != nil {
			g.log.Info("refusing a priced request", "client", charge.Client, "capability", price.Capability, "err", err)
			msg := err.Error()
			if errors.Is(err, payments.ErrOutOfRange) {
				msg = "the server could not price this request within the price it announced; nothing was charged"
			}
			g.unusedDirect(ctx, call, "the server refused to price this request")
			call.Answer(ctx, &jsonrpc.Error{Code: contextvm.CodePriceRefused, Message: msg})
			return
		}
		if quote.Waive {
			g.unusedDirect(ctx, call, "the server waived this request's price")
			if g.opts.Channels != nil {
				g.waived(ctx, call)
			}
			call.Run()
			return
		}
		charge.Amount = quote.Amount
		if quote.Description != "" {
			charge.Description = quote.Description
		}
		if g.direct(ctx, call, charge) {
			return
		}
		if len(g.opts.Processors) == 0 {
			g.offerDirect(ctx, call, charge, explicit)
			return
		}
		if explicit {
			g.gated(ctx, call, charge)
			return
		}
		if g.opts.Channels != nil && g.byChannel(ctx, call, charge) {
			return
		}
		g.transparent(ctx, call, charge, nil, nil)
	})
}

// issue asks the first processor for the payment of rec.Charge and
// records it, with the rest of rec, in space under key, until expires,
// before the client learns of it.
func (g *Gate) issue(ctx context.Context, space, key string, rec issuedRecord, expires time.Time) (payments.PaymentRequired, error) {
	proc := g.opts.Processors[0]
	req, err := proc.Require(ctx, rec.Charge)
	if err != nil {
		return req, fmt.Errorf("issue a %s payment request: %w", proc.PMI(), err)
	}
	rec.Req = req
	b, err := json.Marshal(rec)
	if err != nil {
		return req, err
	}
	if err := g.state.Put(ctx, space, []byte(key), b, expires); err != nil {
		return req, fmt.Errorf("record the payment request: %w", err)
	}
	return req, nil
}

// issued returns the payment request recorded in space under key, if any.
func (g *Gate) issued(ctx context.Context, space, key string) (issuedRecord, bool) {
	raw, ok, err := g.state.Get(ctx, space, []byte(key))
	if err != nil || !ok {
		return issuedRecord{}, false
	}
	var rec issuedRecord
	if json.Unmarshal(raw, &rec) != nil || rec.Req.PayReq == "" || g.procs[rec.Req.PMI] == nil {
		return issuedRecord{}, false
	}
	return rec, true
}

// forgetIssued drops the record of a payment request that is settled
// either way.
func (g *Gate) forgetIssued(ctx context.Context, space, key string) {
	if err := g.state.Put(ctx, space, []byte(key), nil, time.Now()); err != nil {
		g.log.Warn("could not forget a payment request", "key", key, "err", err)
	}
}

// issueFailed answers a request whose payment request could not be issued.
func (g *Gate) issueFailed(ctx context.Context, call *contextvm.Call, err error) {
	g.log.Error("could not issue a payment request", "request", call.Key(), "err", err)
	call.Answer(ctx, &jsonrpc.Error{Code: contextvm.CodeTransportError, Message: "the server could not issue a payment request; nothing was charged; retry later"})
}

// transparent collects the payment of one request with CEP-8's
// notifications. prev is the payment request already issued for it, before
// a restart, if any; fund the channel the payment opens or tops up, if it
// does (the request is then the channel's next receipt).
func (g *Gate) transparent(ctx context.Context, call *contextvm.Call, charge payments.Charge, prev *payments.PaymentRequired, fund *funding) {
	key := call.Key()
	wctx, withdraw := context.WithCancelCause(ctx)
	defer withdraw(nil)
	g.mu.Lock()
	if _, busy := g.verifying[key]; prev != nil && busy {
		// Another replay of the same request is being verified.
		g.mu.Unlock()
		call.Drop()
		return
	}
	g.verifying[key] = withdraw
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.verifying, key)
		g.mu.Unlock()
	}()
	var req payments.PaymentRequired
	if prev != nil {
		if _, done, err := g.state.Get(ctx, chargeSpace, []byte(key)); err != nil || done {
			call.Drop() // credited already: a replay is answered from the store
			return
		}
		req = *prev
		g.log.Info("verifying a payment requested before a restart", "client", charge.Client, "request", key, "amount", charge.Amount)
	} else {
		var err error
		rec := issuedRecord{Charge: charge, Fund: fund}
		if g.h.Coordinator() != nil && !call.Batched() {
			evt := call.Event()
			rec.Event, rec.Wrap = &evt, call.Wrap()
		}
		if req, err = g.issue(ctx, issuedSpace, key, rec, g.expiry(call.Created())); err != nil {
			g.issueFailed(ctx, call, err)
			return
		}
	}
	if fund != nil {
		req.Meta = fundingMeta(*fund)
	}
	// Sent again on a resumed request, in case the first never left: a
	// client ignores a second payment_required for one request.
	call.Notify(ctx, contextvm.MethodPaymentRequired, req)
	vctx, cancel := context.WithTimeout(wctx, g.verifyTimeout(req))
	err := g.procs[req.PMI].Verify(vctx, charge, req)
	cancel()
	g.mu.Lock()
	g.verifying[key] = nil // the wait is over: a cancel from now on goes to the request
	g.mu.Unlock()
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(wctx), errWithdrawn) {
		fctx, cancel := context.WithTimeout(ctx, finalCheck)
		err = g.procs[req.PMI].Verify(fctx, charge, req)
		cancel()
		if err != nil && ctx.Err() == nil {
			g.log.Info("the client withdrew a request before paying for it; it did not run", "client", charge.Client, "request", charge.RequestID, "amount", charge.Amount)
			g.forgetIssued(ctx, issuedSpace, key)
			call.Drop() // cancelled: no answer (MCP)
			return
		}
	}
	if err != nil && ctx.Err() != nil {
		// The server is stopping: the payment request stays on record,
		// to be verified when the request is replayed after a restart.
		g.log.Info("stopped verifying a payment", "client", charge.Client, "request", key, "err", err)
		return
	}
	if err != nil {
		g.log.Info("payment not verified", "client", charge.Client, "request", charge.RequestID, "err", err)
		g.forgetIssued(ctx, issuedSpace, key)
		msg := fmt.Sprintf("payment not verified: %v; the request did not run", err)
		call.Notify(ctx, contextvm.MethodPaymentRejected, map[string]any{"pmi": req.PMI, "amount": req.Amount, "message": msg})
		call.Answer(ctx, &jsonrpc.Error{Code: contextvm.CodePaymentRejected, Message: msg})
		return
	}
	if err := g.claimRun(ctx, call, charge); err != nil {
		if errors.Is(err, errRunClaimed) && prev != nil {
			// Taken up from a lost replica that had claimed the run
			// (it verified the payment too) and died.
			call.Answer(ctx, &jsonrpc.Error{Code: contextvm.CodePaidResultLost, Message: paidLost(charge.Amount, charge.Unit)})
			return
		}
		call.Drop() // run and answered by the replica that claimed it
		return
	}
	if fund != nil && !g.funded(ctx, call, *fund, req) {
		g.forgetIssued(ctx, issuedSpace, key)
		return
	}
	g.paid(ctx, call, charge, req.PMI)
	g.forgetIssued(ctx, issuedSpace, key)
	call.Notify(ctx, contextvm.MethodPaymentAccepted, map[string]any{"amount": req.Amount, "pmi": req.PMI})
	call.Run()
}

// verifyTimeout bounds the wait for req's payment: VerifyTimeout, and a
// second past req's TTL. The TTL counts whole seconds, rounded down for
// an invoice made ahead, so a wait of exactly the TTL would end before
// the invoice does, and the client would be told the server stopped
// waiting; the second more lets the processor, which knows the expiry,
// say the invoice expired.
func (g *Gate) verifyTimeout(req payments.PaymentRequired) time.Duration {
	d := g.opts.VerifyTimeout
	if req.TTL > 0 {
		d = min(d, time.Duration(req.TTL+1)*time.Second)
	}
	return d
}

// paid records that the request under key was paid for, before it runs:
// from now on its replays are answered from its result, or told that it
// was lost.
func (g *Gate) paid(ctx context.Context, call *contextvm.Call, charge payments.Charge, pmi string) {
	call.Keep()
	g.charged(ctx, call.Key(), call.OrigID(), call.Created(), charge, pmi)
}

// charged records the charge of the request under key, whose JSON-RPC id
// is id and whose event was created at created.
func (g *Gate) charged(ctx context.Context, key string, id jsonrpc.ID, created nostr.Timestamp, charge payments.Charge, pmi string) {
	g.running.Store(key, true)
	rec, _ := json.Marshal(chargeRecord{ID: rawID(id), Amount: charge.Amount, Unit: charge.Unit, PMI: pmi})
	if err := g.state.Put(ctx, chargeSpace, []byte(key), rec, g.expiry(created)); err != nil {
		g.log.Error("a verified payment could not be recorded; running the request anyway", "request", key, "err", err)
	}
	g.log.Info("payment verified", "client", charge.Client, "request", key, "amount", charge.Amount, "unit", charge.Unit, "pmi", pmi)
}

// errRunClaimed: another replica of the group claimed the run of a paid
// request.
var errRunClaimed = errors.New("another replica claimed the run of this paid request")

// paidLost is the message of CodePaidResultLost.
func paidLost(amount int64, unit string) string {
	return fmt.Sprintf("paid, result lost: the server stopped while running this request; the payment of %d %s stands and the call may or may not have taken effect", amount, unit)
}

// claimRun claims, in a replica group, the run of the transparent request
// under key whose payment this replica verified. It fails, to run
// nothing, when another replica holds the claim (errRunClaimed) or the
// claim cannot be made within the membership timeout: a replica presumed
// dead whose clients a survivor took over may still verify the payment it
// waited for, and the survivor verifies it too (see adopt); one of them
// runs the request. (Explicit gating needs no such claim: spending the
// grant is one.)
func (g *Gate) claimRun(ctx context.Context, call *contextvm.Call, charge payments.Charge) error {
	key := call.Key()
	grp, ok := g.h.Coordinator().(interface{ Timeout() time.Duration })
	if !ok {
		return nil
	}
	deadline := time.Now().Add(grp.Timeout())
	for {
		won, err := g.state.Claim(ctx, paidRunSpace, []byte(key), g.expiry(call.Created()))
		if err == nil && !won {
			err = errRunClaimed
		}
		if err == nil {
			return nil
		}
		if errors.Is(err, errRunClaimed) || !time.Now().Before(deadline) || ctx.Err() != nil {
			g.log.Warn("a verified payment's request is left to another replica", "client", charge.Client, "request", key, "err", err)
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Adopt takes up, on a survivor, the priced request event id that client
// sent to a lost replica, which claimed it and never answered: a request
// whose payment that replica recorded as verified is answered as its
// replays are (the stored result, or CodePaidResultLost); one whose
// payment request it had issued, and whose event it kept, is run through
// the gate again, which verifies that payment request rather than issuing
// another, and runs the request once paid: that event is returned, for
// the coordinator to record and run. It reports false when it has no
// record of the request, which is then answered CodeReplicaLost.
func (g *Gate) Adopt(ctx context.Context, id nostr.ID, client nostr.PubKey, wrap nostr.Kind) (resume *nostr.Event, ok bool) {
	key := id.Hex()
	if _, ok, err := g.state.Get(ctx, chargeSpace, []byte(key)); err == nil && ok {
		g.log.Info("answering a lost replica's paid request from the payment state", "client", client.Hex(), "request", key)
		g.Replayed(ctx, nostr.Event{ID: id, PubKey: client}, wrap)
		return nil, true
	}
	rec, ok := g.issued(ctx, issuedSpace, key)
	if !ok || rec.Event == nil || rec.Event.ID != id || rec.Event.PubKey != client {
		return nil, false
	}
	g.log.Info("taking over a lost replica's wait for a payment", "client", client.Hex(), "request", key, "amount", rec.Charge.Amount, "unit", rec.Charge.Unit)
	return rec.Event, true
}

// expiry is when the records of a request may be forgotten: when its
// event leaves the freshness window, and a replay of it is stale anyway.
func (g *Gate) expiry(created nostr.Timestamp) time.Time {
	return created.Time().Add(g.window + time.Second)
}

// Answered keeps the answer of a paid request, to answer its replays.
func (g *Gate) Answered(ctx context.Context, call *contextvm.Call, content string) {
	g.stored(ctx, call.Key(), call.Created(), content)
}

// stored keeps content, the answer of the paid request under key whose
// event was created at created.
func (g *Gate) stored(ctx context.Context, key string, created nostr.Timestamp, content string) {
	defer g.running.Delete(key)
	if err := g.state.Put(ctx, resultSpace, []byte(key), []byte(content), g.expiry(created)); err != nil {
		g.log.Error("the answer of a paid request could not be stored", "request", key, "err", err)
	}
}

// Replayed answers a replay of a paid request event: from its stored
// answer, or with CodePaidResultLost when the server lost it. A replay of
// a request still running, or not paid for, gets nothing.
func (g *Gate) Replayed(ctx context.Context, inner nostr.Event, wrapKind nostr.Kind) {
	key := inner.ID.Hex()
	rec, ok, err := g.state.Get(ctx, chargeSpace, []byte(key))
	if err != nil {
		return
	}
	if !ok {
		g.resume(ctx, inner, wrapKind)
		return
	}
	if _, running := g.running.Load(key); running {
		return
	}
	content, ok, err := g.state.Get(ctx, resultSpace, []byte(key))
	if err != nil {
		return
	}
	dr, direct := g.directOf(ctx, key)
	if direct && dr.Redeemed && (dr.Change != "" || !ok) {
		// The change too, in case the first payment_accepted was lost;
		// or, with no result to answer, word that the payment was taken.
		if err := g.sendAccepted(ctx, inner.PubKey, key, wrapKind, dr); err == nil && dr.Change != "" {
			g.delivered(ctx, inner.PubKey, key)
		}
	}
	if !ok {
		var cr chargeRecord
		if json.Unmarshal(rec, &cr) != nil {
			return
		}
		id, err := jsonrpc.MakeID(decodeRawID(cr.ID))
		if err != nil {
			return
		}
		msg := paidLost(cr.Amount, cr.Unit)
		if direct && !dr.Redeemed {
			msg = redeemingLost
		}
		resp := mcpmsg.ErrorResponse(id, contextvm.CodePaidResultLost, "%s", msg)
		enc, err := contextvm.EncodeContent(resp)
		if err != nil {
			return
		}
		content = []byte(enc)
	}
	tags := nostr.Tags{{"p", inner.PubKey.Hex()}, {"e", key}}
	if err := g.h.Reply(ctx, inner.PubKey, string(content), tags, wrapKind); err != nil {
		g.log.Info("could not answer a replayed paid request", "request", key, "err", err)
	}
}

// resume takes up a request whose payment was asked for before the server
// restarted and never verified: the replay is dispatched again, and the
// gate verifies the payment request on record instead of issuing another
// (see transparent). A request whose payment this process is verifying
// already gets nothing.
func (g *Gate) resume(ctx context.Context, inner nostr.Event, wrapKind nostr.Kind) {
	key := inner.ID.Hex()
	g.mu.Lock()
	_, busy := g.verifying[key]
	g.mu.Unlock()
	if busy {
		return
	}
	if _, ok := g.issued(ctx, issuedSpace, key); !ok {
		return
	}
	g.h.Dispatch(ctx, inner, wrapKind)
}

// Cancelled stops waiting for the payment of the request under key, whose
// client cancelled it; false if no payment of it is awaited here.
func (g *Gate) Cancelled(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	stop := g.verifying[key]
	if stop == nil {
		return false
	}
	stop(errWithdrawn)
	g.verifying[key] = nil
	return true
}

// gated serves a priced request under explicit gating: it runs once per
// verified payment for the same client, method and params (CEP-8's
// invocation identity, grantKey). Sent again while its payment is awaited,
// it is the same invocation: see retried.
func (g *Gate) gated(ctx context.Context, call *contextvm.Call, charge payments.Charge) {
	gk, err := grantKey(call.Client(), call.Request())
	if err != nil {
		call.Answer(ctx, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()})
		return
	}
	if pmi, ok := g.consume(ctx, gk); ok {
		g.paid(ctx, call, charge, pmi)
		call.Run()
		return
	}
	g.mu.Lock()
	gr := g.pending[gk]
	if gr != nil && gr.failed != nil {
		delete(g.pending, gk) // a failed payment: issue a new one
		gr = nil
	}
	if gr == nil {
		// A payment asked for before a restart (or by another replica),
		// and not yet spent, is verified rather than asked for again.
		if rec, ok := g.issued(ctx, grantIssueSpace, gk); ok && !g.grantUsed(ctx, rec.Req.PayReq) {
			gr = newGrant(rec.Req, rec.Charge)
			g.pending[gk] = gr
			g.log.Info("verifying a payment requested before a restart", "client", rec.Charge.Client, "amount", rec.Charge.Amount)
			if !g.h.Go(func(ctx context.Context) { g.verifyGrant(ctx, gk, gr) }) {
				delete(g.pending, gk)
				g.mu.Unlock()
				return
			}
		}
	}
	g.mu.Unlock()
	if gr != nil {
		g.retried(ctx, call, gk, gr, charge)
		return
	}
	req, err := g.issue(ctx, grantIssueSpace, gk, issuedRecord{Charge: charge}, time.Now().Add(max(g.window, g.opts.VerifyTimeout)))
	if err != nil {
		g.issueFailed(ctx, call, err)
		return
	}
	gr = newGrant(req, charge)
	g.mu.Lock()
	g.pending[gk] = gr
	g.mu.Unlock()
	if !g.h.Go(func(ctx context.Context) { g.verifyGrant(ctx, gk, gr) }) {
		return
	}
	g.paymentRequired(ctx, call, req)
}

// retried answers a request sent again while the payment gr of its
// invocation is awaited, by this client process or another with the same
// key. Until the payment is seen it is offered the same payment request
// again (CodePaymentRequired): a second invoice for one invocation could
// be paid twice, and a client that lost the first (a new process) could
// otherwise not pay before it expires. Once the payment is seen, the
// request waits a moment for the grant and runs on it, or is answered
// CodePaymentPending while the payment is verified and recorded.
func (g *Gate) retried(ctx context.Context, call *contextvm.Call, gk string, gr *grant, charge payments.Charge) {
	if !g.sawPayment(ctx, gr) {
		g.paymentRequired(ctx, call, gr.req)
		return
	}
	t := time.NewTimer(seenWait)
	select {
	case <-gr.done:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	if pmi, ok := g.consume(ctx, gk); ok {
		g.paid(ctx, call, charge, pmi)
		call.Run()
		return
	}
	data, _ := json.Marshal(map[string]any{"instructions": "the payment is being verified; send the same request again after retry_after seconds",
		"retry_after": pendingRetrySec})
	call.Answer(ctx, &jsonrpc.Error{Code: contextvm.CodePaymentPending, Message: "Payment Pending", Data: data})
}

// sawPayment reports whether the payment of gr was seen: by its verifier,
// or now, in one look (payments.Checker), after which the verifier is
// woken to verify and record it at once rather than at its next poll.
func (g *Gate) sawPayment(ctx context.Context, gr *grant) bool {
	chk, canLook := g.procs[gr.req.PMI].(payments.Checker)
	g.mu.Lock()
	seen := gr.seen
	// The next look is due lookInterval after the last one booked; one
	// request at most waits for it, and any more are offered the payment
	// request again without a look.
	now := time.Now()
	at := gr.lookedAt.Add(lookInterval)
	if at.Before(now) {
		at = now
	}
	look := canLook && !seen && at.Sub(now) <= lookInterval
	if look {
		gr.lookedAt = at
	}
	g.mu.Unlock()
	if seen || !look {
		return seen
	}
	if wait := time.Until(at); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
	lctx, cancel := context.WithTimeout(ctx, lookTimeout)
	paid, err := chk.Paid(lctx, gr.charge, gr.req)
	cancel()
	if err != nil {
		g.log.Debug("could not look at a payment; offering it again", "client", gr.charge.Client, "err", err)
	}
	if !paid {
		return false
	}
	g.mu.Lock()
	gr.seen = true
	wake := gr.wake
	g.mu.Unlock()
	if wake != nil {
		wake(errLookAgain)
	}
	return true
}

// paymentRequired answers the request under key CodePaymentRequired,
// offering req.
func (g *Gate) paymentRequired(ctx context.Context, call *contextvm.Call, req payments.PaymentRequired) {
	data, _ := json.Marshal(map[string]any{
		"instructions":    "pay one of payment_options, then send the same request again",
		"payment_options": []payments.PaymentRequired{req},
	})
	call.Answer(ctx, &jsonrpc.Error{Code: contextvm.CodePaymentRequired, Message: "Payment Required", Data: data})
}

// grantUsed reports whether the grant bought by payReq was spent.
func (g *Gate) grantUsed(ctx context.Context, payReq string) bool {
	_, used, err := g.state.Get(ctx, grantUsedSpace, []byte(payReq))
	return used || err != nil
}

// verifyGrant waits for an explicit-gating payment and records the grant
// it buys. Woken (sawPayment), it stops waiting and verifies again at once.
func (g *Gate) verifyGrant(ctx context.Context, gk string, gr *grant) {
	defer close(gr.done)
	proc := g.procs[gr.req.PMI]
	deadline := time.Now().Add(g.verifyTimeout(gr.req))
	var err error
	for {
		vctx, cancel := context.WithDeadline(ctx, deadline)
		wctx, wake := context.WithCancelCause(vctx)
		g.mu.Lock()
		gr.wake = wake
		g.mu.Unlock()
		err = proc.Verify(wctx, gr.charge, gr.req)
		again := err != nil && vctx.Err() == nil && errors.Is(context.Cause(wctx), errLookAgain)
		wake(nil)
		cancel()
		if !again {
			break
		}
	}
	g.mu.Lock()
	gr.wake = nil
	gr.seen = gr.seen || err == nil
	g.mu.Unlock()
	if err == nil {
		rec, _ := json.Marshal(map[string]string{"pay_req": gr.req.PayReq, "pmi": gr.req.PMI})
		err = g.state.Put(ctx, grantSpace, []byte(gk), rec, time.Now().Add(g.window))
		if err == nil {
			g.forgetIssued(ctx, grantIssueSpace, gk)
		}
	} else if ctx.Err() == nil {
		g.forgetIssued(ctx, grantIssueSpace, gk) // expired or refused: a new one is issued next time
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		gr.failed = err
		g.log.Info("explicit-gating payment not verified", "client", gr.charge.Client, "err", err)
		return
	}
	if g.pending[gk] == gr {
		delete(g.pending, gk)
	}
}

// consume takes the grant under gk, once: of requests racing for it, one
// wins.
func (g *Gate) consume(ctx context.Context, gk string) (pmi string, ok bool) {
	rec, found, err := g.state.Get(ctx, grantSpace, []byte(gk))
	if err != nil || !found {
		return "", false
	}
	var v map[string]string
	if json.Unmarshal(rec, &v) != nil || v["pay_req"] == "" {
		return "", false
	}
	claimed, err := g.state.Claim(ctx, grantUsedSpace, []byte(v["pay_req"]), time.Now().Add(g.window))
	if err != nil || !claimed {
		return "", false
	}
	// The grant is spent: it expires now.
	g.state.Put(ctx, grantSpace, []byte(gk), rec, time.Now())
	return v["pmi"], true
}

// grantKey is CEP-8's key of an explicit-gating grant: the client and the
// hex sha256 of the JCS form of {method, params without _meta}.
func grantKey(client nostr.PubKey, m *jsonrpc.Request) (string, error) {
	var params map[string]json.RawMessage
	if len(m.Params) > 0 && string(m.Params) != "null" {
		if err := json.Unmarshal(m.Params, &params); err != nil {
			return "", fmt.Errorf("params are not an object: %w", err)
		}
	}
	delete(params, "_meta")
	if params == nil {
		params = map[string]json.RawMessage{}
	}
	raw, err := json.Marshal(map[string]any{"method": m.Method, "params": params})
	if err != nil {
		return "", err
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return client.Hex() + ":" + hex.EncodeToString(sum[:]), nil
}

func rawID(id jsonrpc.ID) json.RawMessage {
	b, _ := json.Marshal(id.Raw())
	return b
}

func decodeRawID(b json.RawMessage) any {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return nil
	}
	if f, ok := v.(float64); ok {
		return int64(f)
	}
	return v
}
