// Package quotation is the pre-payment flow of the NIP-10 seed over MCP:
// a client asks the price of one exact tool call (nip10/quote), pays the
// payment instructions it gets, confirms with a proof of payment
// (nip10/confirm), then makes the call naming the quotation in
// _meta["nip10/quotation_id"]. A quotation is bound to the caller's DID
// and to the call it quoted (the tool name and the RFC 8785 canonical form
// of its arguments), expires, and pays for one call only.
//
// Quotations live in a durable.Store, so that a restart neither forgets a
// paid quotation nor lets one be spent twice: confirming is a Put of the
// quotation marked paid, spending is a Claim, which succeeds once. A call
// that its transport refused before MCP read it (a wrong header, a
// duplicate request id) did not run, so Release gives its quotation back:
// the quotation moves to its next attempt, whose Claim is a new key.
//
// The Desk is transport neutral; Middleware puts it in front of an MCP
// streamable HTTP endpoint, where it answers the two quotation methods and
// refuses a priced tools/call without a paid quotation, each with a
// JSON-RPC answer (HTTP 200), before the request reaches MCP.
//
// The client's side is the Buyer: quote, pay within a cep8.PayOptions
// budget with its wallets, and for a usd price at most its tolerance above
// the price at its own rate (cep8.PayOptions.USDLimit), as over Nostr,
// and confirm.
//
// Prepaid payment channels (package payments/channel) ride on the same
// flow: a deposit is quoted (nip10/quote with {"channel": …}), paid and
// confirmed like a price, and its confirmation opens the channel (or tops
// it up) in HTTP.Channels; a priced tools/call then carries a receipt in
// channel.Header, signed with the caller's DIDAuthV1 key, instead of a
// quotation id. On the client, Buyer.Transport attaches the receipts.
//
// Files: quotation.go (the Desk, Quote), http.go (Middleware, HTTP),
// codes.go (methods, _meta keys, error codes), buyer.go (Buyer, and the
// client's reading of prices and refusals: Priced, PriceOf, IsRequired;
// Buyer.Learn takes a tools/list's prices, to hold a usd price's
// quotation to the client's rate),
// channel.go (the server's side of channels: deposits, receipts, close),
// channelbuyer.go (the client's: Buyer.Transport, Buyer.CloseChannel),
// channelrecord.go (the client's record of its channels by endpoint, with
// their times and the refunded ones: Channels, as cvm channels lists them).
package quotation

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/bolt11"
	"github.com/gowebpki/jcs"
)

// Names of the extension on the wire.
const (
	MethodQuote    = "nip10/quote"
	MethodConfirm  = "nip10/confirm"
	MetaQuotation  = "nip10/quotation_id"
	MetaPrice      = "nip10/price"
	CapabilityName = "nip10"
	// DataChannelPMI in the data of a CodeQuotationRequired refusal says
	// that the server also takes the call's price from a prepaid payment
	// channel: its value is channel.PMI.
	DataChannelPMI = "channel_pmi"
)

// Durable spaces.
const (
	spaceQuotes = "nip10-quote"
	spaceSpent  = "nip10-spent"
)

// keep is how long a quotation's record outlives its expiry: a paid
// quotation can be spent this long after it expired for payment, and an
// expired one is told apart from an unknown one.
const keep = time.Hour

// Errors of the flow; each has its JSON-RPC code (Code).
var (
	ErrRequired     = errors.New("this tool is priced: get a quotation with nip10/quote, pay it, confirm it with nip10/confirm, then call again with _meta[\"nip10/quotation_id\"]")
	ErrUnknown      = errors.New("no such quotation")
	ErrExpired      = errors.New("the quotation has expired")
	ErrSpent        = errors.New("the quotation was already used for a call")
	ErrNotYours     = errors.New("the quotation was issued to another caller")
	ErrMismatch     = errors.New("the quotation is for another call (tool or arguments differ)")
	ErrBadProof     = errors.New("the payment proof does not match the quotation's payment")
	ErrNotPaid      = errors.New("the quotation is not confirmed: pay it and call nip10/confirm first")
	ErrNotPriced    = errors.New("the tool is free: no quotation needed")
	ErrAnonymous    = errors.New("quotations are bound to a DID: sign the request (Authorization: DIDAuthV1)")
	ErrInvalidInput = errors.New("invalid nip10 parameters")
)

// Price is a tool's price.
type Price struct {
	Amount int64  `json:"amount"`
	Unit   string `json:"unit"`
}

// Instructions say how to pay a quotation.
type Instructions struct {
	PMI    string `json:"pmi"`
	PayReq string `json:"pay_req"`
}

// Quote is the answer to nip10/quote.
type Quote struct {
	ID           string       `json:"quotation_id"`
	Price        Price        `json:"price"`
	Instructions Instructions `json:"payment_instructions"`
	ExpiresAt    int64        `json:"expires_at"` // unix seconds
}

// record is a quotation as stored.
type record struct {
	Caller   string                   `json:"caller"`
	Tool     string                   `json:"tool"`
	Args     string                   `json:"args_sha256"`
	Price    Price                    `json:"price"`
	Payment  payments.PaymentRequired `json:"payment"`
	Expires  time.Time                `json:"expires"`
	Paid     bool                     `json:"paid,omitempty"`
	ChargeID string                   `json:"charge_id"`
	// Attempt counts the Releases: the spend of attempt n claims
	// spentKey(id, n).
	Attempt int `json:"attempt,omitempty"`
	// Deposit is set on the quotation of a payment channel's deposit or
	// top-up, which pays for no call (Tool is empty).
	Deposit *Deposit `json:"deposit,omitempty"`
}

// spentKey is the claim that spends attempt n of quotation id; the first
// is the id itself, as records written before Release existed have it.
func spentKey(id string, n int) []byte {
	if n == 0 {
		return []byte(id)
	}
	return []byte(id + "#" + strconv.Itoa(n))
}

// Options configure a Desk.
type Options struct {
	// Store keeps the quotations. Required.
	Store durable.Store
	// Processor issues the payment requests and verifies payment.
	// Required.
	Processor payments.Processor
	// Prices are the priced tools, by name.
	Prices map[string]payments.Cap
	// Pricer computes a price within the cap (default payments.Announced).
	Pricer payments.Pricer
	// Rates converts a price in usd into sats when it is quoted (rounded
	// up to a whole sat); without it, or when it fails, a usd-priced tool
	// is not quoted (payments.ErrNoRate, -32016).
	Rates payments.Rates
	// TTL is how long a quotation can be paid and confirmed (default
	// 5 min).
	TTL time.Duration
	// VerifyTimeout bounds the processor's check of a payment at
	// confirmation (default 10 s).
	VerifyTimeout time.Duration
	Now           func() time.Time
	Logger        *slog.Logger
}

// Desk issues, confirms and spends quotations.
type Desk struct{ opts Options }

// New returns a desk.
func New(opts Options) (*Desk, error) {
	if opts.Store == nil || opts.Processor == nil {
		return nil, errors.New("quotation: Options.Store and Options.Processor are required")
	}
	if opts.TTL <= 0 {
		opts.TTL = 5 * time.Minute
	}
	if opts.VerifyTimeout <= 0 {
		opts.VerifyTimeout = 10 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Pricer == nil {
		opts.Pricer = payments.Announced
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Desk{opts: opts}, nil
}

// Priced returns a tool's announced price.
func (d *Desk) Priced(tool string) (payments.Cap, bool) {
	c, ok := d.opts.Prices[tool]
	return c, ok
}

// ArgsHash is the hex SHA-256 of the RFC 8785 canonical form of a call's
// arguments; absent or null arguments are {}.
func ArgsHash(args json.RawMessage) (string, error) {
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	canon, err := jcs.Transform(args)
	if err != nil {
		return "", fmt.Errorf("%w: arguments: %w", ErrInvalidInput, err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// Quote prices the call of tool with args for caller and issues its
// payment request.
func (d *Desk) Quote(ctx context.Context, caller, tool string, args json.RawMessage) (Quote, error) {
	if caller == "" {
		return Quote{}, ErrAnonymous
	}
	cap, ok := d.Priced(tool)
	if !ok {
		return Quote{}, fmt.Errorf("%w: %s", ErrNotPriced, tool)
	}
	hash, err := ArgsHash(args)
	if err != nil {
		return Quote{}, err
	}
	if cap, err = cap.InSats(ctx, d.opts.Rates); err != nil {
		// The source's error stays in the log: its URL may hold a key.
		d.opts.Logger.Warn("quotation: no usd rate", "tool", tool, "err", err)
		return Quote{}, fmt.Errorf("%w: %s is priced in usd, and the server cannot convert it into sats now; nothing was charged", payments.ErrNoRate, tool)
	}
	id := rand.Text()
	params, _ := json.Marshal(map[string]any{"name": tool, "arguments": args})
	q, err := payments.Resolve(ctx, d.opts.Pricer, payments.PriceRequest{Cap: cap, Method: "tools/call", Params: params, Client: caller, RequestID: id})
	if err != nil {
		return Quote{}, err
	}
	if q.Waive {
		return Quote{}, fmt.Errorf("%w: %s is free for this call", ErrNotPriced, tool)
	}
	charge := payments.Charge{Amount: q.Amount, Unit: cap.Unit, Description: fmt.Sprintf("tools/call %s", tool), RequestID: id, Client: chargeClient(caller)}
	pr, err := d.opts.Processor.Require(ctx, charge)
	if err != nil {
		return Quote{}, fmt.Errorf("quotation: payment request: %w", err)
	}
	now := d.opts.Now()
	rec := record{Caller: caller, Tool: tool, Args: hash, Price: Price{Amount: q.Amount, Unit: cap.Unit}, Payment: pr, Expires: now.Add(d.opts.TTL), ChargeID: id}
	if err := d.put(ctx, id, rec); err != nil {
		return Quote{}, err
	}
	return Quote{ID: id, Price: rec.Price, Instructions: Instructions{PMI: pr.PMI, PayReq: pr.PayReq}, ExpiresAt: rec.Expires.Unix()}, nil
}

func (d *Desk) put(ctx context.Context, id string, rec record) error {
	b, _ := json.Marshal(rec)
	if err := d.opts.Store.Put(ctx, spaceQuotes, []byte(id), b, rec.Expires.Add(keep)); err != nil {
		return fmt.Errorf("quotation: store: %w", err)
	}
	return nil
}

// load returns the quotation id of caller.
func (d *Desk) load(ctx context.Context, caller, id string) (record, error) {
	if id == "" {
		return record{}, fmt.Errorf("%w: quotation_id is required", ErrInvalidInput)
	}
	b, ok, err := d.opts.Store.Get(ctx, spaceQuotes, []byte(id))
	if err != nil {
		return record{}, fmt.Errorf("quotation: store: %w", err)
	}
	if !ok {
		return record{}, fmt.Errorf("%w: %s", ErrUnknown, clip(id))
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		return record{}, fmt.Errorf("quotation: stored record: %w", err)
	}
	if rec.Caller != caller {
		return record{}, ErrNotYours
	}
	return rec, nil
}

// Confirm checks the proof of payment of quotation id and marks it paid.
// For Lightning the proof is the preimage, whose SHA-256 must be the
// invoice's payment hash; the processor then checks that the invoice is
// settled. Confirming a paid quotation again is a no-op.
func (d *Desk) Confirm(ctx context.Context, caller, id, proof string) error {
	_, err := d.confirm(ctx, caller, id, proof)
	return err
}

// confirm is Confirm, and returns the paid quotation.
func (d *Desk) confirm(ctx context.Context, caller, id, proof string) (record, error) {
	rec, err := d.load(ctx, caller, id)
	if err != nil {
		return record{}, err
	}
	if rec.Paid {
		return rec, nil
	}
	if spent, err := d.spent(ctx, id, rec.Attempt); err != nil {
		return record{}, err
	} else if spent {
		return record{}, ErrSpent
	}
	if !d.opts.Now().Before(rec.Expires) {
		return record{}, ErrExpired
	}
	if rec.Payment.PMI == payments.PMILightningBolt11 {
		if err := checkPreimage(rec.Payment.PayReq, proof); err != nil {
			return record{}, err
		}
	}
	vctx, cancel := context.WithTimeout(ctx, d.opts.VerifyTimeout)
	defer cancel()
	charge := payments.Charge{Amount: rec.Price.Amount, Unit: rec.Price.Unit, RequestID: rec.ChargeID, Client: chargeClient(caller)}
	if err := d.opts.Processor.Verify(vctx, charge, rec.Payment); err != nil {
		return record{}, fmt.Errorf("%w: %w", ErrBadProof, err)
	}
	rec.Paid = true
	return rec, d.put(ctx, id, rec)
}

func checkPreimage(payReq, proof string) error {
	inv, err := bolt11.Decode(payReq)
	if err != nil {
		return fmt.Errorf("quotation: stored invoice: %w", err)
	}
	b, err := hex.DecodeString(strings.TrimSpace(proof))
	if err != nil || len(b) != 32 {
		return fmt.Errorf("%w: want the payment's preimage, 64 hex digits", ErrBadProof)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != inv.PaymentHash() {
		return fmt.Errorf("%w: sha256(preimage) is not the invoice's payment hash", ErrBadProof)
	}
	return nil
}

func (d *Desk) spent(ctx context.Context, id string, attempt int) (bool, error) {
	_, ok, err := d.opts.Store.Get(ctx, spaceSpent, spentKey(id, attempt))
	if err != nil {
		return false, fmt.Errorf("quotation: store: %w", err)
	}
	return ok, nil
}

// Spend uses paid quotation id for caller's call of tool with args: it
// succeeds once, across restarts. Call it just before forwarding the call.
func (d *Desk) Spend(ctx context.Context, caller, id, tool string, args json.RawMessage) error {
	rec, err := d.load(ctx, caller, id)
	if err != nil {
		return err
	}
	hash, err := ArgsHash(args)
	if err != nil {
		return err
	}
	if rec.Tool != tool || rec.Args != hash {
		return ErrMismatch
	}
	if !rec.Paid {
		if spent, _ := d.spent(ctx, id, rec.Attempt); spent {
			return ErrSpent
		}
		if !d.opts.Now().Before(rec.Expires) {
			return ErrExpired
		}
		return ErrNotPaid
	}
	ok, err := d.opts.Store.Claim(ctx, spaceSpent, spentKey(id, rec.Attempt), rec.Expires.Add(keep))
	if err != nil {
		return fmt.Errorf("quotation: store: %w", err)
	}
	if !ok {
		return ErrSpent
	}
	d.opts.Logger.Info("quotation spent", "tool", tool, "caller", caller, "amount", rec.Price.Amount, "unit", rec.Price.Unit)
	return nil
}

// Release gives back paid quotation id, which caller's last Spend used,
// for a call that never ran: its transport refused it before handing it
// to MCP. The quotation can then pay for the same call again. Call it only
// when the call certainly did not reach the tool, and at most once per
// Spend: a released quotation spent by a call that did run is a call run
// for free.
func (d *Desk) Release(ctx context.Context, caller, id string) error {
	rec, err := d.load(ctx, caller, id)
	if err != nil {
		return err
	}
	if !rec.Paid {
		return ErrNotPaid
	}
	if spent, err := d.spent(ctx, id, rec.Attempt); err != nil {
		return err
	} else if !spent {
		return fmt.Errorf("quotation: release of %s, which is not spent", clip(id))
	}
	rec.Attempt++
	if err := d.put(ctx, id, rec); err != nil {
		return err
	}
	d.opts.Logger.Info("quotation released: its call did not reach the tool", "tool", rec.Tool, "caller", caller, "attempt", rec.Attempt)
	return nil
}

// chargeClient is the caller as a payments.Charge names a client: a hex
// key, as over ContextVM (payment methods may put it in their requests):
// the key of a did:nostr, else the SHA-256 of the DID.
func chargeClient(caller string) string {
	if k, ok := strings.CutPrefix(caller, "did:nostr:"); ok && len(k) == 64 {
		if _, err := hex.DecodeString(k); err == nil {
			return k
		}
	}
	sum := sha256.Sum256([]byte(caller))
	return hex.EncodeToString(sum[:])
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
