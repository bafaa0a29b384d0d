package cep8

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/payments"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// CEP-8's direct payments (docs/protocol-compatibility.md, "Direct
// payments"): a bearer asset in the request, redeemed before it runs.
const (
	// TagDirectPayment on a priced request pays for it:
	// ["direct_payment", "<pmi>", "<payload>"]. The first whose PMI has a
	// Redeemer here is used, and only it.
	TagDirectPayment = "direct_payment"
	// TagChange on notifications/payment_accepted returns what a direct
	// payment was worth above the amount kept: ["change", "<pmi>",
	// "<payload>"].
	TagChange = "change"
)

// Durable spaces of direct payments.
const (
	directSpace        = "contextvm.direct"          // a request's redemption (directRecord), by route key
	directPayloadSpace = "contextvm.direct.payloads" // payloads presented, by sha256: each redeemed once
	directOwedSpace    = "contextvm.direct.owed"     // change not delivered ([]owedChange), by client
)

// changeKeep is how long change that could not be delivered is kept for
// its client, and a payload presented is remembered: a month, for a client
// that went away to come back; a payload older than that is refused by
// its issuer as spent anyway.
const changeKeep = 30 * 24 * time.Hour

// directRecord is the redemption of a request's direct payment, written
// before the payload is redeemed (Redeemed false) and again, with the
// change, before the request runs and payment_accepted leaves.
type directRecord struct {
	PMI          string `json:"pmi"`
	Redeemed     bool   `json:"redeemed"`
	Amount       int64  `json:"amount,omitempty"`
	Change       string `json:"change,omitempty"`
	ChangeAmount int64  `json:"change_amount,omitempty"`
}

// owedChange is change whose payment_accepted no relay delivered: the
// client was gone. It is sent again on the client's next request.
type owedChange struct {
	Request string `json:"request"` // the paid request's event id, hex
	PMI     string `json:"pmi"`
	Amount  int64  `json:"amount"` // the amount kept
	Change  string `json:"change"`
}

// directPayment is the first direct_payment tag whose PMI supported says
// the server takes, if any: its PMI and payload ("" when the tag has
// none).
func directPayment(tags nostr.Tags, supported func(pmi string) bool) (pmi, payload string, ok bool) {
	for _, t := range tags {
		if len(t) < 2 || t[0] != TagDirectPayment || !supported(t[1]) {
			continue
		}
		if len(t) >= 3 {
			payload = t[2]
		}
		return t[1], payload, true
	}
	return "", "", false
}

// redeems reports whether a Redeemer takes pmi.
func (g *Gate) redeems(pmi string) bool { return g.redeemers[pmi] != nil }

// direct serves a priced request that carries a direct payment, and
// reports whether it did: the payment was redeemed and the request run,
// or its redemption failed and the request answered. It reports false
// when there is no direct payment the server takes, or when it was
// rejected without being consumed (the client told, by payment_rejected):
// the request then goes on in the normal flow.
//
// The order is what makes it at most once: the payload is claimed (never
// redeemed twice, by any request), the redemption and the charge recorded
// (a replay is never run again), then the payload redeemed, the change
// recorded, and only then the request run; with change, payment_accepted
// carries it, sent as the request runs, and the answer is held until the
// relay has taken it.
func (g *Gate) direct(ctx context.Context, call *contextvm.Call, charge payments.Charge) bool {
	pmi, payload, ok := directPayment(call.Event().Tags, g.redeems)
	if !ok {
		return false
	}
	switch {
	case call.Batched():
		g.rejectDirect(ctx, call, pmi, 0, "a direct payment pays for one call, not for a batch; it was not consumed")
		return false
	case payload == "":
		g.rejectDirect(ctx, call, pmi, 0, "the direct_payment tag has no payload")
		return false
	}
	key := call.Key()
	sum := sha256.Sum256([]byte(pmi + " " + payload))
	won, err := g.state.Claim(ctx, directPayloadSpace, sum[:], time.Now().Add(changeKeep))
	if err == nil && won {
		err = g.putDirect(ctx, call, directRecord{PMI: pmi})
		if err != nil {
			g.release(ctx, sum[:])
		}
	}
	switch {
	case err != nil:
		g.log.Error("a direct payment could not be recorded; not redeeming it", "client", charge.Client, "request", key, "err", err)
		g.rejectDirect(ctx, call, pmi, 0, "the server could not record the payment, and did not take it")
		return false
	case !won:
		g.log.Info("a direct payment presented again", "client", charge.Client, "request", key, "pmi", pmi)
		g.rejectDirect(ctx, call, pmi, 0, "this payment was presented with another request, and is not taken for this one")
		return false
	}
	g.paid(ctx, call, charge, pmi)
	red, err := g.redeemers[pmi].Redeem(ctx, charge, payload)
	var rej *payments.RejectedError
	if errors.As(err, &rej) {
		g.forgetCharge(ctx, key)
		g.forgetDirect(ctx, key)
		g.release(ctx, sum[:])
		g.log.Info("direct payment rejected", "client", charge.Client, "request", key, "pmi", pmi, "err", err)
		g.rejectDirect(ctx, call, pmi, rej.Required, rej.Error())
		return false
	}
	if err != nil {
		// The payload may be the server's now, or not: it is not redeemed
		// again, nothing runs, and the client is not told it was rejected.
		// The answer is kept for replays (paid's Keep).
		g.log.Error("a direct payment's redemption failed; it may or may not have been taken", "client", charge.Client, "request", key, "pmi", pmi, "err", err)
		call.Answer(ctx, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
			"the server could not redeem the %s payment: it may or may not have been taken, and the request did not run", pmi)})
		return true
	}
	rec := directRecord{PMI: pmi, Redeemed: true, Amount: red.Amount, Change: red.Change, ChangeAmount: red.ChangeAmount}
	if err := g.putDirect(ctx, call, rec); err != nil {
		g.log.Error("a redeemed direct payment could not be recorded; running the request anyway", "client", charge.Client, "request", key, "err", err)
	}
	if rec.Change != "" {
		g.owe(ctx, call.Client(), owedChange{Request: key, PMI: pmi, Amount: rec.Amount, Change: rec.Change})
	}
	g.log.Info("direct payment redeemed", "client", charge.Client, "request", key, "amount", red.Amount, "change", red.ChangeAmount, "pmi", pmi)
	if rec.Change == "" {
		// No payment_accepted without change: the answer says the payment
		// was taken, since a request runs only once its payment is
		// redeemed and a payment not taken is named by payment_rejected
		// before anything else (CEP-8 makes the acknowledgement
		// optional). That spares every exactly-paid call an encrypted
		// event: a seal here, a relay's check, an unwrap at the client.
		call.Run()
		return true
	}
	// payment_accepted goes out while the request runs, not before it:
	// sealing it and the relay's OK cost as much as a short call. The
	// answer waits for it, so the client still hears of its payment (and
	// gets its change) first.
	accepted := make(chan struct{})
	call.AnswerAfter(accepted)
	accept := func(ctx context.Context) {
		defer close(accepted)
		err := call.NotifyWith(ctx, contextvm.MethodPaymentAccepted, acceptedParams(rec), changeTags(rec))
		switch {
		case err != nil && rec.Change != "":
			g.log.Info("change not delivered: kept for the client's next request", "client", charge.Client, "request", key, "err", err)
		case err != nil:
			g.log.Info("payment_accepted not delivered", "client", charge.Client, "request", key, "err", err)
		case rec.Change != "":
			g.delivered(ctx, call.Client(), key)
		}
	}
	if !g.h.Go(accept) {
		accept(ctx)
	}
	call.Run()
	return true
}

// rejectDirect tells the client its direct payment was not consumed
// (payment_rejected, amount the one required when set).
func (g *Gate) rejectDirect(ctx context.Context, call *contextvm.Call, pmi string, required int64, message string) {
	params := map[string]any{"pmi": pmi, "message": message}
	if required > 0 {
		params["amount"] = required
	}
	call.Notify(ctx, contextvm.MethodPaymentRejected, params)
}

// unusedDirect tells a client whose request was not charged (waived,
// refused, not priced) that its direct payment, if it sent one, was not
// consumed: before anything else, since a client takes an answer without
// word of its payment for its payment taken.
func (g *Gate) unusedDirect(ctx context.Context, call *contextvm.Call, why string) {
	if pmi, _, ok := directPayment(call.Event().Tags, g.redeems); ok {
		g.rejectDirect(ctx, call, pmi, 0, why+"; the payment was not consumed")
	}
}

// offerDirect asks for a direct payment in payment_required, for a
// server with no other payment method: under explicit gating as -32042's
// payment option; transparently as the notification, and the request then
// ends unanswered, since its payment comes with the request sent again.
func (g *Gate) offerDirect(ctx context.Context, call *contextvm.Call, charge payments.Charge, explicit bool) {
	var req payments.PaymentRequired
	err := errors.New("no Redeemer asks for payments")
	for _, r := range g.opts.Redeemers {
		if rq, ok := r.(payments.Requirer); ok {
			req, err = rq.Require(ctx, charge)
			break
		}
	}
	if err != nil {
		g.issueFailed(ctx, call, err)
		return
	}
	if explicit {
		g.paymentRequired(ctx, call, req)
		return
	}
	call.Notify(ctx, contextvm.MethodPaymentRequired, req)
	call.Drop()
}

func acceptedParams(rec directRecord) map[string]any {
	return map[string]any{"amount": rec.Amount, "pmi": rec.PMI}
}

func changeTags(rec directRecord) nostr.Tags {
	if rec.Change == "" {
		return nil
	}
	return nostr.Tags{{TagChange, rec.PMI, rec.Change}}
}

func (g *Gate) putDirect(ctx context.Context, call *contextvm.Call, rec directRecord) error {
	b, _ := json.Marshal(rec)
	return g.state.Put(ctx, directSpace, []byte(call.Key()), b, g.expiry(call.Created()))
}

// directOf is the redemption recorded for the request under key, if any.
func (g *Gate) directOf(ctx context.Context, key string) (directRecord, bool) {
	raw, ok, err := g.state.Get(ctx, directSpace, []byte(key))
	var rec directRecord
	if err != nil || !ok || json.Unmarshal(raw, &rec) != nil {
		return directRecord{}, false
	}
	return rec, true
}

func (g *Gate) forgetDirect(ctx context.Context, key string) {
	if err := g.state.Put(ctx, directSpace, []byte(key), nil, time.Now()); err != nil {
		g.log.Warn("could not forget a direct payment", "request", key, "err", err)
	}
}

// release forgets a payload presented and not consumed: it may be
// presented again.
func (g *Gate) release(ctx context.Context, sum []byte) {
	if err := g.state.Put(ctx, directPayloadSpace, sum, nil, time.Now()); err != nil {
		g.log.Warn("could not release a direct payment not consumed", "err", err)
	}
}

// owed is the change kept for client.
func (g *Gate) owed(ctx context.Context, client nostr.PubKey) []owedChange {
	raw, ok, err := g.state.Get(ctx, directOwedSpace, client[:])
	var list []owedChange
	if err != nil || !ok || json.Unmarshal(raw, &list) != nil {
		return nil
	}
	return list
}

// updateOwed changes the change kept for client, in one step.
func (g *Gate) updateOwed(ctx context.Context, client nostr.PubKey, f func([]owedChange) []owedChange) {
	g.owedMu.Lock()
	defer g.owedMu.Unlock()
	list := f(g.owed(ctx, client))
	b, _ := json.Marshal(list)
	expires := time.Now().Add(changeKeep)
	if len(list) == 0 {
		b, expires = nil, time.Now()
	}
	if err := g.state.Put(ctx, directOwedSpace, client[:], b, expires); err != nil {
		g.log.Error("could not record the change owed to a client", "client", client.Hex(), "err", err)
	}
}

// owe keeps o for client until it is delivered.
func (g *Gate) owe(ctx context.Context, client nostr.PubKey, o owedChange) {
	g.updateOwed(ctx, client, func(list []owedChange) []owedChange {
		if slices.ContainsFunc(list, func(x owedChange) bool { return x.Request == o.Request }) {
			return list
		}
		return append(list, o)
	})
}

// delivered forgets the change of the request under key, which reached
// client.
func (g *Gate) delivered(ctx context.Context, client nostr.PubKey, key string) {
	g.updateOwed(ctx, client, func(list []owedChange) []owedChange {
		return slices.DeleteFunc(list, func(x owedChange) bool { return x.Request == key })
	})
}

// contact sends a client that makes a request the change it was owed,
// each on a payment_accepted about the request that paid it, as when the
// request was redeemed; each delivered is forgotten.
func (g *Gate) contact(call *contextvm.Call) {
	client := call.Client()
	if len(g.redeemers) == 0 {
		return
	}
	if _, busy := g.delivering.LoadOrStore(client, true); busy {
		return
	}
	ctx := context.Background()
	list := g.owed(ctx, client)
	if len(list) == 0 || !g.h.Go(func(ctx context.Context) {
		defer g.delivering.Delete(client)
		for _, o := range list {
			if err := g.sendAccepted(ctx, client, o.Request, call.Wrap(), directRecord{PMI: o.PMI, Redeemed: true, Amount: o.Amount, Change: o.Change}); err != nil {
				g.log.Info("owed change still not delivered", "client", client.Hex(), "request", o.Request, "err", err)
				return
			}
			g.log.Info("owed change delivered", "client", client.Hex(), "request", o.Request)
			g.delivered(ctx, client, o.Request)
		}
	}) {
		g.delivering.Delete(client)
	}
}

// sendAccepted sends client the payment_accepted of rec, about the request
// event key, outside of a call (a replay's, or change owed).
func (g *Gate) sendAccepted(ctx context.Context, client nostr.PubKey, key string, wrap nostr.Kind, rec directRecord) error {
	raw, _ := json.Marshal(acceptedParams(rec))
	content, err := contextvm.EncodeContent(&jsonrpc.Request{Method: contextvm.MethodPaymentAccepted, Params: raw})
	if err != nil {
		return err
	}
	tags := append(nostr.Tags{{"p", client.Hex()}, {"e", key}}, changeTags(rec)...)
	return g.h.Reply(ctx, client, content, tags, wrap)
}

// redeemingLost is the message of CodePaidResultLost for a request whose
// direct payment was being redeemed when the server stopped.
const redeemingLost = "paid, result lost: the server stopped while redeeming this request's direct payment; it may or may not have been taken, and the request did not run"
