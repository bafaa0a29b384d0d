package mint

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/payments/cashu"
)

// Unit is the one unit the mint issues.
const Unit = "sat"

// Defaults of Options.
const (
	// DefaultQuoteTTL is how long a mint quote's invoice can be paid.
	DefaultQuoteTTL = time.Hour
	// DefaultMaxAmount bounds one mint or melt quote: a simulator's
	// million sats, well above any test and far below what overflows.
	DefaultMaxAmount = 1_000_000
	// DefaultMaxProofs bounds the inputs and the outputs of one request
	// (NUT-03's max inputs / outputs): 1,000 is some 400 KB of JSON,
	// within maxBody, and ample for amounts written in powers of two.
	DefaultMaxProofs = 1000
	// DefaultPayTimeout bounds a melt's pay_invoice.
	DefaultPayTimeout = time.Minute
)

// Options configure a Mint. Store, Lightning and Seed are required; zero
// values of the others take the defaults beside them.
type Options struct {
	// Store keeps spent secrets, pending proofs, signed outputs and quotes
	// across restarts; the mint is the only writer of its spaces.
	Store durable.Store
	// Lightning makes and pays the invoices; if it is also a Notifier,
	// mint quotes are marked paid on its notifications.
	Lightning Lightning
	// Seed derives the keyset (at least MinSeedLen bytes): keep it secret
	// and keep it, or every proof the mint issued becomes worthless.
	Seed []byte
	// InputFeePPK is the keyset's input_fee_ppk (NUT-02): the fee, in
	// thousandths of a sat per input, of a swap or melt (default 0).
	InputFeePPK uint64
	// FeeReserve is the sats a melt quote reserves for the Lightning fee
	// (default 0: the simulator charges none); what is not spent comes
	// back as change (NUT-08) to a melt that gives blank outputs.
	FeeReserve uint64
	QuoteTTL   time.Duration
	MaxAmount  uint64
	MaxProofs  int
	PayTimeout time.Duration
	// Name and Description are shown in GET /v1/info.
	Name        string
	Description string
	Logger      *slog.Logger
	Now         func() time.Time
}

// Mint is an offline Cashu mint: NUT-00 to 07 and 12 with bolt11 (NUT-23)
// over a Lightning. Its methods are safe for concurrent use; Handler
// serves them over HTTP.
type Mint struct {
	opts Options
	st   durable.Store
	ln   Lightning
	ks   keyset
	log  *slog.Logger
	now  func() time.Time
	stop context.CancelFunc
	ctx  context.Context // ends at Close: the quote watchers' lifetime
	wg   sync.WaitGroup
	// mu orders the read-check-write of records: claims, quote states
	// and pending marks. Signing and verifying run outside it.
	mu sync.Mutex
	// paying are the melt quotes whose payment runs in this process.
	paying map[string]bool
}

// New returns a mint over opts. Close stops it.
func New(opts Options) (*Mint, error) {
	if opts.Store == nil || opts.Lightning == nil {
		return nil, errors.New("mint: Options.Store and Options.Lightning are required")
	}
	ks, err := deriveKeyset(opts.Seed, Unit, opts.InputFeePPK)
	if err != nil {
		return nil, err
	}
	if opts.QuoteTTL <= 0 {
		opts.QuoteTTL = DefaultQuoteTTL
	}
	if opts.MaxAmount == 0 {
		opts.MaxAmount = DefaultMaxAmount
	}
	if opts.MaxProofs <= 0 {
		opts.MaxProofs = DefaultMaxProofs
	}
	if opts.PayTimeout <= 0 {
		opts.PayTimeout = DefaultPayTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Mint{opts: opts, st: opts.Store, ln: opts.Lightning, ks: ks, log: opts.Logger, now: opts.Now,
		ctx: ctx, stop: stop, paying: map[string]bool{}}, nil
}

// Close stops the quote watchers and waits for them. It does not close the
// Store or the Lightning, which the caller owns.
func (m *Mint) Close() error {
	m.stop()
	m.wg.Wait()
	return nil
}

// Keyset is the mint's active keyset, public side.
func (m *Mint) Keyset() cashu.Keyset { return m.ks.pub }

// newQuoteID is a random UUID (version 4): a quote id is a secret between
// wallet and mint (NUT-04), so it must not be guessable.
func newQuoteID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// internal wraps an error that is the mint's, not the request's: the
// handler answers 500 and logs it.
func internal(what string, err error) error {
	return fmt.Errorf("mint: %s: %w", what, err)
}
