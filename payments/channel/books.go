package channel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cvmgo/cvm/durable"
)

// Durable spaces of the books.
const (
	// channelSpace: a channel's record (record.encode), by channel id.
	channelSpace = "channel"
	// fundingSpace: the channel id a funding payment was applied to, by
	// payment hash, so that one payment funds one channel only.
	fundingSpace = "channel-funding"
)

// Defaults of Options.
const (
	// DefaultIdleTTL is how long a channel stays open without a receipt: a
	// month, long enough for an agent's weekly job, short enough that an
	// abandoned deposit goes back within the month.
	DefaultIdleTTL = 30 * 24 * time.Hour
	// DefaultRetention is how long a closed channel's record is kept: its
	// refund stays owed (and a paid one is not paid again) that long.
	DefaultRetention = 400 * 24 * time.Hour
)

// ErrFundingUsed is returned for a funding payment already applied to
// another channel.
var ErrFundingUsed = errors.New("channel: funding payment already applied to another channel")

// ErrTooManyTopUps is returned when a channel has had maxFunding payments:
// close it and open another.
var ErrTooManyTopUps = fmt.Errorf("channel: %d funding payments on one channel; close it and open another", maxFunding)

// Options configure Books.
type Options struct {
	// Store keeps the records (required): every change is written to it
	// before the method that makes it returns.
	Store durable.Store
	// ServerKey is the server's public key bytes, part of every channel id
	// (see NewID); required.
	ServerKey []byte
	// Refunder pays refunds; required by Refund only.
	Refunder Refunder
	// IdleTTL closes a channel that long after its last receipt (default
	// DefaultIdleTTL); Retention keeps a closed channel that long (default
	// DefaultRetention).
	IdleTTL   time.Duration
	Retention time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Log receives the opens, closes and refunds (default slog.Default()).
	Log *slog.Logger
}

// Books are a server's channels: it opens them from verified funding
// payments, accepts receipts against them, tops them up, closes them and
// refunds what is unspent. Methods are safe for concurrent use; all state is
// in the store, so Books made again on a reopened store carry on where the
// last left off, and Books of several processes on one store that is a
// durable.Swapper (a replica group's) keep one set of books between them.
type Books struct {
	opts Options
	// swapper is opts.Store when it can compare and swap (nil otherwise):
	// then a change is written only over the record it was made from.
	swapper durable.Swapper
	// stripes serialize this process's changes to one channel: a
	// channel's changes take the stripe of its id's first byte.
	stripes [64]sync.Mutex
	// funding serializes opens and top-ups, which claim a payment hash
	// across channels (rare next to receipts).
	funding sync.Mutex
	// paying holds the channels whose refund this process pays now.
	payingMu sync.Mutex
	paying   map[ID]bool
}

// New returns the books kept in o.Store.
func New(o Options) (*Books, error) {
	if o.Store == nil {
		return nil, errors.New("channel: Options.Store is required")
	}
	if len(o.ServerKey) == 0 || len(o.ServerKey) > 255 {
		return nil, fmt.Errorf("channel: server key of %d bytes", len(o.ServerKey))
	}
	if o.IdleTTL <= 0 {
		o.IdleTTL = DefaultIdleTTL
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	b := &Books{opts: o, paying: make(map[ID]bool)}
	b.swapper, _ = o.Store.(durable.Swapper)
	return b, nil
}

func (b *Books) stripe(id ID) *sync.Mutex { return &b.stripes[id[0]%byte(len(b.stripes))] }

// maxChanges bounds how often a change is made again because another
// process changed the channel in between. Each time someone else's change
// went through, so the group makes progress; the bound is for a top-up or
// a close that keeps losing to a stream of receipts (or a store that
// never swaps), which gives up with ErrConflict rather than spin.
const maxChanges = 1000

// edit changes channel id: f gets its record as read (nil when there is
// none, or it is another client's), changes it or makes one, and says
// whether to write it. A channel idle past the TTL is closed as of then
// before f sees it, and recorded so even when f refuses. The record is
// written over the bytes it was read from (durable.Swapper): when another
// process changed it in between, it is read again and f runs again on what
// is there, so that f's refusals carry the state as it is. Without a
// Swapper, the channel's stripe is all that serializes changes.
func (b *Books) edit(ctx context.Context, client []byte, id ID, f func(rec *record) (*record, bool, error)) (*record, error) {
	mu := b.stripe(id)
	mu.Lock()
	defer mu.Unlock()
	var rec *record
	for range maxChanges {
		r, raw, err := b.read(ctx, client, id)
		if err != nil {
			return nil, err
		}
		idle := false
		if at := b.idleSince(r); !at.IsZero() {
			b.close(r, at)
			idle = true
		}
		rec = r
		next, write, ferr := f(r)
		switch {
		case ferr != nil && !idle:
			return rec, ferr
		case ferr != nil:
			next = r // f refused: record the idle close only
		case !write && !idle:
			return next, nil
		}
		written, err := b.put(ctx, next, raw)
		if err != nil {
			return nil, err
		}
		if !written {
			// Another process changed it: again, from its change.
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("channel: change channel %s: %w", id, err)
			}
			continue
		}
		if idle {
			b.opts.Log.Info("channel closed idle", "channel", id, "owed_msat", r.Owed)
		}
		return next, ferr
	}
	var s *State
	if rec != nil {
		s = &rec.State
	}
	return nil, refuse(CodeConflict, s, "channel %s changed under this call %d times; send it again", id, maxChanges)
}

// change is edit of a channel that must exist: ErrNotFound otherwise.
func (b *Books) change(ctx context.Context, client []byte, id ID, f func(rec *record) (write bool, err error)) (*record, error) {
	return b.edit(ctx, client, id, func(rec *record) (*record, bool, error) {
		if rec == nil {
			return nil, false, refuse(CodeNotFound, nil, "no channel %s", id)
		}
		write, err := f(rec)
		return rec, write, err
	})
}

// read reads channel id of client and the bytes it was read from; nil
// when there is none, or it is another client's.
func (b *Books) read(ctx context.Context, client []byte, id ID) (*record, []byte, error) {
	raw, ok, err := b.opts.Store.Get(ctx, channelSpace, id[:])
	if err != nil {
		return nil, nil, fmt.Errorf("channel: read channel %s: %w", id, err)
	}
	if !ok {
		return nil, nil, nil
	}
	rec, err := decodeRecord(raw)
	if err != nil {
		return nil, nil, err
	}
	if !bytes.Equal(rec.Client, client) {
		return nil, nil, nil
	}
	return rec, raw, nil
}

// idleSince is when rec closes idle, if it is open and idle past the TTL
// now; zero otherwise.
func (b *Books) idleSince(rec *record) time.Time {
	if rec == nil || rec.Closed {
		return time.Time{}
	}
	if idle := rec.LastUse.Add(b.opts.IdleTTL); !b.opts.Now().Before(idle) {
		return idle
	}
	return time.Time{}
}

func (b *Books) close(rec *record, at time.Time) {
	rec.Closed, rec.ClosedAt, rec.Owed = true, at, rec.Deposit-rec.Accumulated
}

// put writes rec over old, the bytes it was read from (nil: over nothing),
// and reports whether it did: not when another process changed the record
// in between. Without a Swapper it writes whatever is there. The record
// expires Retention after it closes (or would, idle).
func (b *Books) put(ctx context.Context, rec *record, old []byte) (bool, error) {
	end := rec.ClosedAt
	if !rec.Closed {
		end = rec.LastUse.Add(b.opts.IdleTTL)
	}
	written, err := true, error(nil)
	if b.swapper != nil {
		written, err = b.swapper.Swap(ctx, channelSpace, rec.Channel[:], old, rec.encode(), end.Add(b.opts.Retention))
	} else {
		err = b.opts.Store.Put(ctx, channelSpace, rec.Channel[:], rec.encode(), end.Add(b.opts.Retention))
	}
	if err != nil {
		return false, fmt.Errorf("channel: record channel %s: %w", rec.Channel, err)
	}
	return written, nil
}

// maxRef bounds Accept's ref, which may come from the client (an HTTP
// clientTxRef) and is stored with every receipt: an event id is 64 bytes.
const maxRef = 256

// Funding is a Lightning payment to the server, verified settled by the
// caller, that opens a channel or tops one up.
type Funding struct {
	PaymentHash [32]byte
	AmountMsat  uint64
	// Client is the payer's public key bytes (see NewID): the key that
	// signs its requests, and so its receipts.
	Client []byte
	// Fragment is the vm_id_fragment its receipts carry: FragmentNostr for
	// a Nostr key, the DID key's fragment over HTTP.
	Fragment string
}

// claimFunding records that hash funds id, unless it does already;
// b.funding is held. In a shared store the claim is swapped in over
// nothing, so that two processes never give one payment to two channels.
func (b *Books) claimFunding(ctx context.Context, hash [32]byte, id ID) error {
	for range maxChanges {
		v, ok, err := b.opts.Store.Get(ctx, fundingSpace, hash[:])
		switch {
		case err != nil:
			return fmt.Errorf("channel: read funding: %w", err)
		case ok && !bytes.Equal(v, id[:]):
			return ErrFundingUsed
		case ok:
			return nil
		}
		exp := b.opts.Now().Add(b.opts.IdleTTL + b.opts.Retention)
		if b.swapper == nil {
			err = b.opts.Store.Put(ctx, fundingSpace, hash[:], id[:], exp)
		} else if ok, err = b.swapper.Swap(ctx, fundingSpace, hash[:], nil, id[:], exp); err == nil && !ok {
			continue // claimed meanwhile: by this channel, or another?
		}
		if err != nil {
			return fmt.Errorf("channel: record funding: %w", err)
		}
		return nil
	}
	return fmt.Errorf("channel: funding payment %x: claimed and released %d times meanwhile", hash[:8], maxChanges)
}

// Open opens the channel f funds, and returns its state. Opening it again
// with the same payment returns its state as it is now: Open is idempotent,
// across the processes sharing the store too.
func (b *Books) Open(ctx context.Context, f Funding) (State, error) {
	if f.AmountMsat == 0 {
		return State{}, errors.New("channel: a deposit of 0 msat opens no channel")
	}
	if err := checkFragment(f.Fragment); err != nil {
		return State{}, err
	}
	id, err := NewID(b.opts.ServerKey, f.Client, f.PaymentHash)
	if err != nil {
		return State{}, err
	}
	b.funding.Lock()
	defer b.funding.Unlock()
	opened := false
	rec, err := b.edit(ctx, f.Client, id, func(rec *record) (*record, bool, error) {
		if rec != nil {
			opened = false
			return rec, false, nil
		}
		if err := b.claimFunding(ctx, f.PaymentHash, id); err != nil {
			return nil, false, err
		}
		now := b.opts.Now()
		opened = true
		return &record{
			State:   State{Channel: id, Fragment: f.Fragment, Deposit: f.AmountMsat, Opened: now, LastUse: now},
			Client:  bytes.Clone(f.Client),
			Funding: [][32]byte{f.PaymentHash},
		}, true, nil
	})
	if err != nil {
		return State{}, err
	}
	if opened {
		b.opts.Log.Info("channel opened", "channel", id, "deposit_msat", f.AmountMsat)
	}
	return rec.State, nil
}

// TopUp adds f's amount to the deposit of channel id, once per payment:
// the same payment again returns the state unchanged.
func (b *Books) TopUp(ctx context.Context, id ID, f Funding) (State, error) {
	b.funding.Lock()
	defer b.funding.Unlock()
	rec, err := b.change(ctx, f.Client, id, func(rec *record) (bool, error) {
		if slices.Contains(rec.Funding, f.PaymentHash) {
			return false, nil
		}
		switch {
		case rec.Closed:
			return false, refuse(CodeClosed, &rec.State, "channel %s is closed; open another", id)
		case len(rec.Funding) >= maxFunding:
			return false, ErrTooManyTopUps
		case rec.Deposit+f.AmountMsat < rec.Deposit:
			return false, fmt.Errorf("channel: a top-up of %d msat overflows the deposit", f.AmountMsat)
		}
		if err := b.claimFunding(ctx, f.PaymentHash, id); err != nil {
			return false, err
		}
		rec.Deposit += f.AmountMsat
		rec.Funding = append(rec.Funding, f.PaymentHash)
		rec.LastUse = b.opts.Now()
		return true, nil
	})
	if err != nil {
		return State{}, err
	}
	return rec.State, nil
}

// Accept accepts r, from client, as payment of price msat for the call it
// rides on, which ref names (the request event's id, the HTTP request's
// clientTxRef), and records it before returning: the call may run once Accept
// returns nil, and r is never accepted again, by any process sharing the
// store. r must be the channel's next receipt: its epoch and fragment, nonce
// one above the last accepted, amount the last accepted plus price, within
// the deposit. Else nothing is recorded and the *Error says why, with the
// state to make the next receipt from: ErrDuplicate for the last accepted
// receipt sent again (its state's Ref tells the same call retried from
// another call reusing it), and ErrConflict (also for a receipt that another
// process's receipt overtook), ErrInsufficientFunds, ErrEpochMismatch,
// ErrTampered, ErrClosed, ErrNotFound.
func (b *Books) Accept(ctx context.Context, client []byte, r *SubRAV, price uint64, ref string) (State, error) {
	if len(ref) > maxRef {
		return State{}, fmt.Errorf("channel: call reference of %d bytes, at most %d", len(ref), maxRef)
	}
	rec, err := b.change(ctx, client, r.ChannelID, func(rec *record) (bool, error) {
		if err := check(&rec.State, r, price); err != nil {
			return false, err
		}
		rec.Nonce, rec.Accumulated, rec.LastUse, rec.Ref = r.Nonce, r.AccumulatedAmount, b.opts.Now(), ref
		return true, nil
	})
	if err != nil {
		return State{}, err
	}
	return rec.State, nil
}

// check says whether r pays price as the next receipt of s.
func check(s *State, r *SubRAV, price uint64) error {
	switch {
	case s.Closed:
		return refuse(CodeClosed, s, "channel %s is closed; %d msat are owed back", s.Channel, s.Owed)
	case r.Version != Version || r.ChainID != ChainLightning || r.VMIDFragment != s.Fragment:
		return refuse(CodeTampered, s, "receipt of version %d, chain %d, fragment %q; the channel's are %d, %d, %q",
			r.Version, r.ChainID, r.VMIDFragment, Version, ChainLightning, s.Fragment)
	case r.ChannelEpoch != s.Epoch:
		return refuse(CodeEpochMismatch, s, "receipt of epoch %d, the channel is in epoch %d", r.ChannelEpoch, s.Epoch)
	case s.Nonce > 0 && r.Nonce == s.Nonce && r.AccumulatedAmount == s.Accumulated:
		return refuse(CodeDuplicate, s, "receipt %d was accepted already", r.Nonce)
	case r.Nonce != s.Nonce+1:
		return refuse(CodeConflict, s, "receipt %d, the next is %d", r.Nonce, s.Nonce+1)
	}
	want := s.Accumulated + price
	if want < s.Accumulated || want > s.Deposit {
		return refuse(CodeInsufficientFunds, s, "%d msat left of a %d msat deposit, the call costs %d",
			s.Deposit-s.Accumulated, s.Deposit, price)
	}
	if r.AccumulatedAmount != want {
		return refuse(CodeConflict, s, "receipt for %d msat in all, the call makes it %d", r.AccumulatedAmount, want)
	}
	return nil
}

// Get returns the state of channel id of client.
func (b *Books) Get(ctx context.Context, client []byte, id ID) (State, error) {
	rec, err := b.change(ctx, client, id, func(*record) (bool, error) { return false, nil })
	if err != nil {
		return State{}, err
	}
	return rec.State, nil
}

// Close closes channel id of client: no receipt is accepted after, and
// Deposit − Accumulated is owed to it (see Refund). Closing a closed
// channel returns its state.
func (b *Books) Close(ctx context.Context, client []byte, id ID) (State, error) {
	closed := false
	rec, err := b.change(ctx, client, id, func(rec *record) (bool, error) {
		closed = !rec.Closed
		if closed {
			b.close(rec, b.opts.Now())
		}
		return closed, nil
	})
	if err != nil {
		return State{}, err
	}
	if closed {
		b.opts.Log.Info("channel closed", "channel", id, "owed_msat", rec.Owed)
	}
	return rec.State, nil
}
