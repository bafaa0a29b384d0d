package wallet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/cvmgo/cvm/payments/cashu"
)

// Reasons a wallet operation is refused.
var (
	ErrInsufficient = errors.New("cashu wallet: not enough sats at this mint")
	ErrSpent        = errors.New("cashu wallet: already spent")
	ErrTokenUnit    = errors.New("cashu wallet: token not in sats")
	ErrAmount       = errors.New("cashu wallet: amount must be above zero")
	ErrNotPaid      = errors.New("cashu wallet: the mint's invoice was not paid")
)

// Options configure a Wallet.
type Options struct {
	// Dir holds the proof files, one per mint (created with mode 0700).
	Dir string
	// HTTP reaches the mints (default: a client with a 30 s timeout).
	HTTP *http.Client
	// LockWait bounds the wait for another process using a mint's proof
	// file (default 2 minutes: it holds the file for one operation).
	LockWait time.Duration
	// PaidWait bounds the wait for the mint to see its invoice paid
	// (default 1 minute).
	PaidWait time.Duration
	// SyncInterval bounds how long an operation's changes to a proof
	// file wait to be fsynced (default 1 s): a crash of the process
	// loses none of them, a power loss at most those of the last
	// interval. Close fsyncs what waits.
	SyncInterval time.Duration
	Logger       *slog.Logger
}

// Wallet holds Cashu proofs in sats at any number of mints, in files under
// Options.Dir. Its methods may be called concurrently, and from several
// processes at once. Close it when done: it fsyncs what its operations
// wrote.
type Wallet struct {
	opts  Options
	store *store
	keys  *keyCache
	log   *slog.Logger
}

// New returns the wallet whose proofs are in opts.Dir.
func New(opts Options) *Wallet {
	if opts.LockWait <= 0 {
		opts.LockWait = 2 * time.Minute
	}
	if opts.PaidWait <= 0 {
		opts.PaidWait = time.Minute
	}
	if opts.SyncInterval <= 0 {
		opts.SyncInterval = time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st := &store{dir: opts.Dir, timeout: opts.LockWait, compactAt: minCompact, compactRatio: 2, sync: newSyncer(opts.SyncInterval, log), journals: map[string]*journal{}}
	return &Wallet{opts: opts, store: st, keys: &keyCache{mints: map[string]*mintKeys{}}, log: log}
}

// Close fsyncs what the wallet's operations wrote and stops its timer.
// Operations after Close fsync as they write. Close may be called more
// than once.
func (w *Wallet) Close() error { return w.store.sync.close() }

// op is one operation on one mint: its proof file, held, and its keys.
type op struct {
	w    *Wallet
	c    *Client
	ss   *session
	keys *keyring
}

// begin opens mint's proof file under its lock, loads the mint's keysets,
// finishes what a crash interrupted (recover.go) and compacts the file
// when it has grown enough (sent.go).
func (w *Wallet) begin(ctx context.Context, mint string) (*op, error) {
	c, err := NewClient(mint, w.opts.HTTP)
	if err != nil {
		return nil, err
	}
	ss, err := w.store.open(ctx, c.URL())
	if err != nil {
		return nil, err
	}
	keys, err := loadKeyring(ctx, c, w.keys)
	if err != nil {
		ss.close()
		return nil, err
	}
	o := &op{w: w, c: c, ss: ss, keys: keys}
	if err := o.recoverPending(ctx); err != nil {
		ss.close()
		return nil, err
	}
	if ss.overgrown() {
		if err := o.compact(ctx); err != nil {
			ss.close()
			return nil, err
		}
	}
	return o, nil
}

func (o *op) end() { o.ss.close() }

// PayFunc pays a mint's Lightning invoice of amount sats, or fails
// without paying.
type PayFunc func(ctx context.Context, invoice string, amount uint64) error

// Mint buys amount sats of ecash at mint: a quote, its invoice paid with
// pay, then the proofs. The outputs are written before the invoice is
// paid, so a crash after paying mints them on the next operation at this
// mint.
func (w *Wallet) Mint(ctx context.Context, mint string, amount uint64, pay PayFunc) error {
	if amount == 0 {
		return ErrAmount
	}
	o, err := w.begin(ctx, mint)
	if err != nil {
		return err
	}
	defer o.end()
	ks, err := o.keys.active(ctx)
	if err != nil {
		return err
	}
	quote, err := o.c.MintQuote(ctx, cashu.MintQuoteBolt11Request{Amount: amount, Unit: Unit})
	if err != nil {
		return err
	}
	if quote.Amount != 0 && quote.Amount != amount {
		return fmt.Errorf("cashu mint %s quoted %d sats for %d asked", o.c.URL(), quote.Amount, amount)
	}
	outputs, err := cashu.NewOutputs(ks.ID, cashu.SplitAmount(amount))
	if err != nil {
		return err
	}
	pending := pendingOp{Kind: opMint, Quote: quote.Quote, Outputs: storeOutputs(outputs), Started: time.Now().UTC()}
	o.ss.pend(pending)
	if err := o.ss.save(); err != nil {
		return err
	}
	if err := pay(ctx, quote.Request, amount); err != nil {
		// Not paid, or not known to be: unless the mint says it is
		// unpaid, the quote stays pending, and the next operation here
		// mints it if the mint sees it paid.
		if q, qerr := o.c.MintQuoteState(ctx, quote.Quote); qerr == nil && q.State == cashu.QuoteUnpaid {
			o.ss.finish(pending)
			return errors.Join(err, o.ss.save())
		}
		return err
	}
	if err := o.awaitPaid(ctx, quote.Quote); err != nil {
		return err
	}
	return o.finishMint(ctx, pending, outputs)
}

// awaitPaid polls the quote until the mint has seen its invoice paid: the
// mint learns of the payment from its own wallet, a moment after ours
// reports it.
func (o *op) awaitPaid(ctx context.Context, quote string) error {
	ctx, cancel := context.WithTimeout(ctx, o.w.opts.PaidWait)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		q, err := o.c.MintQuoteState(ctx, quote)
		if err == nil && q.State != cashu.QuoteUnpaid {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: cashu mint %s has not seen its invoice paid after %s; the quote stays pending and is minted by the next operation at this mint once it has (last error: %v)",
				ErrNotPaid, o.c.URL(), o.w.opts.PaidWait, err)
		case <-tick.C:
		}
	}
}

// finishMint mints a paid quote's outputs and keeps the proofs.
func (o *op) finishMint(ctx context.Context, pending pendingOp, outputs []cashu.Output) error {
	resp, err := o.c.Mint(ctx, cashu.MintBolt11Request{Quote: pending.Quote, Outputs: cashu.Messages(outputs)})
	if err != nil {
		return err
	}
	proofs, err := o.keys.unblind(ctx, outputs, resp.Signatures)
	if err != nil {
		return err
	}
	return o.settle(pending, proofs)
}

// settle keeps proofs and forgets the pending operation they finish.
func (o *op) settle(pending pendingOp, proofs []cashu.Proof) error {
	o.ss.finish(pending)
	o.ss.keep(proofs...)
	return o.ss.save()
}

// swap spends inputs at the mint for new proofs of amounts (their sum is
// the inputs' less the input fees). The outputs are written, and the
// inputs, when ours, moved out of the spendable proofs, before the
// request; the answer's proofs replace them after it.
func (o *op) swap(ctx context.Context, inputs []cashu.Proof, ours bool, amounts []uint64) ([]cashu.Proof, error) {
	return o.swapKeeping(ctx, inputs, ours, amounts, len(amounts))
}

// swapKeeping is swap that keeps only the first keep of the new proofs in
// the file: the others are handed out (a redeemed payment's change). Until
// the answer is in, the outputs are all pending in the file, so a swap
// finished after a crash keeps them all.
func (o *op) swapKeeping(ctx context.Context, inputs []cashu.Proof, ours bool, amounts []uint64, keep int) ([]cashu.Proof, error) {
	ks, err := o.keys.active(ctx)
	if err != nil {
		return nil, err
	}
	outputs, err := cashu.NewOutputs(ks.ID, amounts)
	if err != nil {
		return nil, err
	}
	pending := pendingOp{Kind: opSwap, Inputs: inputs, Ours: ours, Outputs: storeOutputs(outputs), Started: time.Now().UTC()}
	if ours {
		o.ss.spend(inputs)
	}
	o.ss.pend(pending)
	if err := o.ss.save(); err != nil {
		return nil, err
	}
	resp, err := o.c.Swap(ctx, cashu.SwapRequest{Inputs: inputs, Outputs: cashu.Messages(outputs)})
	if err != nil {
		return nil, o.swapFailed(ctx, pending, err)
	}
	proofs, err := o.keys.unblind(ctx, outputs, resp.Signatures)
	if err != nil {
		return nil, err
	}
	return proofs, o.settle(pending, proofs[:keep])
}

// swapFailed handles a swap the mint refused: it did not happen, so the
// pending operation goes, and our inputs come back, less those the mint
// says are spent (sent in a token before, say). A swap whose answer never
// came stays pending: the next operation at this mint finishes it.
func (o *op) swapFailed(ctx context.Context, pending pendingOp, err error) error {
	var me *cashu.Error
	if !errors.As(err, &me) {
		return fmt.Errorf("%w; the swap is finished by the next operation at this mint", err)
	}
	o.ss.finish(pending)
	spent := 0
	if pending.Ours {
		unspent, n, serr := o.unspent(ctx, pending.Inputs)
		if serr != nil {
			unspent = pending.Inputs // keep them all: a later swap tells
		}
		o.ss.keep(unspent...)
		spent = n
	}
	if serr := o.ss.save(); serr != nil {
		return errors.Join(err, serr)
	}
	if me.Code == cashu.CodeProofsSpent {
		if pending.Ours {
			return fmt.Errorf("%w: %d of the proofs chosen were spent already (sent in a token that was received?) and are dropped; try again: %w", ErrSpent, spent, err)
		}
		return fmt.Errorf("%w: this token's proofs are spent at %s (it was received before, by you or by someone else): %w", ErrSpent, o.c.URL(), err)
	}
	return err
}

// checkProofs checks proofs received from someone else before anything
// is sent for them: each of a keyset the mint has in sats, with a key for
// its amount, and its DLEQ proof (NUT-12) valid when it carries one.
func (o *op) checkProofs(ctx context.Context, proofs []cashu.Proof) error {
	for i, p := range proofs {
		ks, err := o.keys.keyset(ctx, p.ID)
		if err != nil {
			return fmt.Errorf("proof %d: %w", i, err)
		}
		key, ok := ks.Keys[p.Amount]
		if !ok {
			return fmt.Errorf("proof %d: %w: keyset %s has no key for %d", i, ErrKeyset, p.ID, p.Amount)
		}
		if p.DLEQ != nil {
			if err := p.VerifyDLEQ(key); err != nil {
				return fmt.Errorf("proof %d: %w", i, err)
			}
		}
	}
	return nil
}

// unspent returns the proofs the mint does not report spent (NUT-07),
// and how many it does.
func (o *op) unspent(ctx context.Context, proofs []cashu.Proof) ([]cashu.Proof, int, error) {
	states, err := o.states(ctx, proofs)
	if err != nil {
		return nil, 0, err
	}
	var keep []cashu.Proof
	for i, st := range states {
		if st != cashu.StateSpent {
			keep = append(keep, proofs[i])
		}
	}
	return keep, len(proofs) - len(keep), nil
}

// states are the mint's states of proofs (NUT-07), in their order.
func (o *op) states(ctx context.Context, proofs []cashu.Proof) ([]string, error) {
	ys := make([]string, len(proofs))
	for i, p := range proofs {
		y, err := p.Y()
		if err != nil {
			return nil, err
		}
		ys[i] = y
	}
	resp, err := o.c.CheckState(ctx, ys)
	if err != nil {
		return nil, err
	}
	if len(resp.States) != len(ys) {
		return nil, fmt.Errorf("cashu mint %s answered %d states for %d proofs", o.c.URL(), len(resp.States), len(ys))
	}
	states := make([]string, len(ys))
	for i, st := range resp.States {
		if st.Y != ys[i] {
			return nil, fmt.Errorf("cashu mint %s answered states out of order", o.c.URL())
		}
		states[i] = st.State
	}
	return states, nil
}

// DeliverFunc hands a token to whoever is paid (prints it, sends it).
type DeliverFunc func(cashu.Token) error

// Send pays amount sats from the proofs held at mint as a token handed to
// deliver: proofs of exactly that amount, swapped for when none add up to
// it, the change kept. The token's proofs leave the spendable ones for a
// sent token in the file before deliver is called, and come back if it
// fails, so that a crash never leaves them to be sent twice nor loses
// them (sent.go). The receiver's swap pays the mint's input fee on the
// token, if it charges one.
func (w *Wallet) Send(ctx context.Context, mint string, amount uint64, deliver DeliverFunc) error {
	if amount == 0 {
		return ErrAmount
	}
	o, err := w.begin(ctx, mint)
	if err != nil {
		return err
	}
	defer o.end()
	send, err := o.selectExact(ctx, amount)
	if err != nil {
		return err
	}
	return o.hand(send, deliver)
}

// SendCovering is Send of a token that leaves amount to its receiver once
// the mint's input fee on its own proofs is paid (the receiver swaps it):
// worth amount and that fee, at most most. It returns the token's value.
func (w *Wallet) SendCovering(ctx context.Context, mint string, amount, most uint64, deliver DeliverFunc) (uint64, error) {
	if amount == 0 {
		return 0, ErrAmount
	}
	o, err := w.begin(ctx, mint)
	if err != nil {
		return 0, err
	}
	defer o.end()
	// The fee depends on the proofs, which depend on the value: a few
	// rounds settle it (it grows by a sat or two at a time).
	var fee uint64
	for range 8 {
		if amount+fee > most {
			return 0, fmt.Errorf("%w: %d sats and the mint's input fee of %d, more than %d", ErrInsufficient, amount, fee, most)
		}
		send, err := o.selectExact(ctx, amount+fee)
		if err != nil {
			return 0, err
		}
		f, err := o.keys.fees(send)
		if err != nil {
			return 0, err
		}
		if f <= fee {
			return amount + fee, o.hand(send, deliver)
		}
		fee = f
	}
	return 0, fmt.Errorf("cashu wallet: no token of %d sats covers the mint's input fee at %s", amount, o.c.URL())
}

// selectExact returns held proofs worth exactly amount: a subset if the
// largest-first pick adds up to it, else the outcome of a swap of enough
// proofs into amount and the change, which is kept. A subset is sent
// without asking the mint (NUT-07): proofs sent leave the spendable ones
// before they are delivered (hand), so none among them was handed out.
func (o *op) selectExact(ctx context.Context, amount uint64) ([]cashu.Proof, error) {
	held := o.ss.state().held()
	var pick []cashu.Proof
	left := amount
	for _, p := range held {
		if p.Amount <= left {
			pick = append(pick, p)
			left -= p.Amount
		}
	}
	if left == 0 {
		return pick, nil
	}
	// Largest first until the sum covers amount and the inputs' fee.
	var inputs []cashu.Proof
	var sum, fee uint64
	for _, p := range held {
		inputs = append(inputs, p)
		sum += p.Amount
		f, err := o.keys.fees(inputs)
		if err != nil {
			return nil, err
		}
		if fee = f; sum >= amount+fee {
			break
		}
	}
	if sum < amount+fee {
		total := o.ss.state().sats
		return nil, fmt.Errorf("%w: %d held at %s, %d asked (and a fee of %d)", ErrInsufficient, total, o.c.URL(), amount, fee)
	}
	send := cashu.SplitAmount(amount)
	change, err := o.changeAmounts(ctx, amount, sum-fee-amount)
	if err != nil {
		return nil, err
	}
	proofs, err := o.swap(ctx, inputs, true, append(slices.Clone(send), change...))
	if err != nil {
		return nil, err
	}
	// The first len(send) proofs answer the send amounts; the change is
	// already in the file with them.
	return proofs[:len(send)], nil
}

// spareCopies is how many payments of the amount just sent a swap's
// change is split for, at a mint without input fees: a wallet paying the
// same price call after call (cvm call --cashu, an agent behind cvm
// proxy) then sends proofs it holds instead of swapping at the mint each
// time. Every proof costs the same to make, in one swap or another, so
// more copies cost nothing but outputs in one request (well under a
// mint's limit) and proofs held, and leave fewer calls that wait on a
// swap: with four, one paid call in five did, enough to move the median.
const spareCopies = 16

// changeAmounts splits a swap's change of sent: up to spareCopies times
// the amounts of sent, then the rest in powers of two. At a mint that
// charges input fees it is the rest alone, since every proof costs a fee
// to spend.
func (o *op) changeAmounts(ctx context.Context, sent, change uint64) ([]uint64, error) {
	ks, err := o.keys.active(ctx)
	if err != nil {
		return nil, err
	}
	var out []uint64
	for n := 0; ks.InputFeePPK == 0 && n < spareCopies && change >= sent; n++ {
		out = append(out, cashu.SplitAmount(sent)...)
		change -= sent
	}
	return append(out, cashu.SplitAmount(change)...), nil
}

// Receive swaps a token's proofs at its mint for new ones only this
// wallet knows, and returns the sats received (the token's amount less
// the mint's input fee). The token must be in sats, of keysets the mint
// has; the DLEQ proofs it carries are verified (NUT-12) before anything is
// sent, and the new signatures' after.
func (w *Wallet) Receive(ctx context.Context, tok cashu.Token) (uint64, error) {
	if tok.Unit != "" && tok.Unit != Unit {
		return 0, fmt.Errorf("%w: its unit is %q", ErrTokenUnit, tok.Unit)
	}
	total, ok := tok.Amount()
	if !ok || total == 0 {
		return 0, fmt.Errorf("%w: the token holds nothing", ErrAmount)
	}
	o, err := w.begin(ctx, tok.Mint)
	if err != nil {
		return 0, err
	}
	defer o.end()
	if err := o.checkProofs(ctx, tok.Proofs); err != nil {
		return 0, err
	}
	fee, err := o.keys.fees(tok.Proofs)
	if err != nil {
		return 0, err
	}
	if fee >= total {
		return 0, fmt.Errorf("%w: the token's %d sats do not cover the mint's fee of %d", ErrAmount, total, fee)
	}
	if _, err := o.swap(ctx, tok.Proofs, false, cashu.SplitAmount(total-fee)); err != nil {
		return 0, err
	}
	return total - fee, nil
}

// MintBalance is what the wallet holds at one mint.
type MintBalance struct {
	Mint    string `json:"mint"`
	Sats    uint64 `json:"sats"`
	Proofs  int    `json:"proofs"`
	Pending uint64 `json:"pending"` // in operations a crash interrupted
	// Sent is in tokens sent that the mint has not yet been seen to
	// spend (asked when the file is compacted): not held, but not known
	// gone either.
	Sent uint64 `json:"sent"`
}

// Balance reads every mint's proof file, without asking the mints: the
// records appended since the wallet last read it, complete ones only.
func (w *Wallet) Balance() ([]MintBalance, error) {
	out, err := w.store.balances()
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b MintBalance) int { return cmp.Compare(a.Mint, b.Mint) })
	return out, nil
}
