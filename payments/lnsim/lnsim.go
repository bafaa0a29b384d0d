// Package lnsim is a simulated Lightning network, offline and in one
// process, for tests, CI and demos. It is a simulator: its money is not
// money, its keys are throwaway, and nothing in it touches a real node or
// chain. Never point anything that handles real funds at it.
//
// A Network holds named wallets with balances in millisatoshis. A wallet
// makes invoices that are real, signed BOLT 11 invoices ("lnbcrt…",
// regtest), each from the wallet's own node key, with a random preimage
// whose sha256 is the payment hash, so any BOLT 11 decoder accepts them.
// Another wallet of the same network pays one: the payer is debited, the
// payee credited, the invoice settled and its preimage revealed to the
// payer; no fee is charged and no route is involved. An invoice can be
// paid once, before it expires; an invoice not made on this network
// cannot be paid at all.
//
// Errors are *payments.WalletError with NIP-47 codes:
// INSUFFICIENT_BALANCE, NOT_FOUND (no such wallet or invoice) and
// PAYMENT_FAILED (expired, already paid, unknown to the network,
// malformed, or the payer's own invoice).
//
// With Options.Dir, the state (wallets, their node keys and balances, and
// invoices) is kept in a JSON file there, rewritten atomically after every
// change, mode 0600 since it holds keys. One process at a time may use a
// directory.
//
// A Network is safe for concurrent use.
package lnsim

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/cvmgo/cvm/internal/secretfile"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/bolt11"
)

// StateFile is the name of the state file in Options.Dir.
const StateFile = "lnsim.json"

// Options configure a Network.
type Options struct {
	// Dir keeps the state across restarts; empty keeps it in memory.
	Dir string
	// Now is the clock for timestamps and expiry (default time.Now).
	Now func() time.Time
	// Logger receives the simulator's logs (default: discarded).
	Logger *slog.Logger
}

// Settlement is a payment the network has made: the invoice (settled,
// preimage known) and who paid whom.
type Settlement struct {
	Invoice payments.Invoice
	Payer   string
	Payee   string
}

// Network is a simulated Lightning network.
type Network struct {
	opts Options

	mu       sync.Mutex
	wallets  map[string]*wallet
	invoices map[string]*invoice // by payment hash, hex
	watchers map[int]func(Settlement)
	nextW    int
}

type wallet struct {
	Balance int64  `json:"balance_msat"`
	NodeKey string `json:"node_key"` // hex secret key of the wallet's node
	key     *btcec.PrivateKey
}

type invoice struct {
	Payee    string `json:"payee"`
	Payer    string `json:"payer,omitempty"`
	Bolt11   string `json:"bolt11"`
	Hash     string `json:"payment_hash"`
	Preimage string `json:"preimage"`
	Amount   int64  `json:"amount_msat"`
	Desc     string `json:"description,omitempty"`
	Created  int64  `json:"created_at"`
	Expires  int64  `json:"expires_at"`
	Settled  int64  `json:"settled_at,omitempty"`
}

type state struct {
	Simulator string              `json:"simulator"`
	Wallets   map[string]*wallet  `json:"wallets"`
	Invoices  map[string]*invoice `json:"invoices"`
}

// Open returns a network, loading its state from opts.Dir if there is
// one.
func Open(opts Options) (*Network, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	n := &Network{opts: opts, wallets: map[string]*wallet{}, invoices: map[string]*invoice{}, watchers: map[int]func(Settlement){}}
	if opts.Dir == "" {
		return n, nil
	}
	path := filepath.Join(opts.Dir, StateFile)
	b, err := secretfile.Read(path, 256<<20)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return n, nil
	case err != nil:
		return nil, fmt.Errorf("lnsim: %w", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("lnsim: %s: %w", path, err)
	}
	for name, w := range st.Wallets {
		kb, err := hex.DecodeString(w.NodeKey)
		if err != nil || len(kb) != 32 {
			return nil, fmt.Errorf("lnsim: %s: wallet %q has a bad node key", path, name)
		}
		w.key, _ = btcec.PrivKeyFromBytes(kb)
		n.wallets[name] = w
	}
	if st.Invoices != nil {
		n.invoices = st.Invoices
	}
	opts.Logger.Info("simulator state loaded", "path", path, "wallets", len(n.wallets), "invoices", len(n.invoices))
	return n, nil
}

// save writes the state; the caller holds mu.
func (n *Network) save() error {
	if n.opts.Dir == "" {
		return nil
	}
	b, err := json.MarshalIndent(state{Simulator: "lnsim: simulated Lightning network, not money", Wallets: n.wallets, Invoices: n.invoices}, "", " ")
	if err != nil {
		return err
	}
	return secretfile.Replace(filepath.Join(n.opts.Dir, StateFile), b)
}

func walletErr(code, format string, args ...any) error {
	return &payments.WalletError{Code: code, Message: fmt.Sprintf(format, args...)}
}

func internalErr(err error) error {
	return walletErr(payments.CodeInternal, "simulator state not saved: %v", err)
}

// AddWallet creates the wallet name with balanceMsat, unless it exists
// (restored from Dir): then it is left as it is and created is false.
func (n *Network) AddWallet(name string, balanceMsat int64) (created bool, err error) {
	if name == "" {
		return false, errors.New("lnsim: a wallet needs a name")
	}
	if balanceMsat < 0 {
		return false, fmt.Errorf("lnsim: wallet %q: negative balance", name)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.wallets[name]; ok {
		return false, nil
	}
	key, err := btcec.NewPrivateKey()
	if err != nil {
		return false, err
	}
	n.wallets[name] = &wallet{Balance: balanceMsat, NodeKey: hex.EncodeToString(key.Serialize()), key: key}
	if err := n.save(); err != nil {
		delete(n.wallets, name)
		return false, fmt.Errorf("lnsim: %w", err)
	}
	return true, nil
}

// Wallets returns the names of the wallets, sorted.
func (n *Network) Wallets() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	names := make([]string, 0, len(n.wallets))
	for name := range n.wallets {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Wallet returns a handle on the wallet name, which implements
// payments.Wallet. It fails with NOT_FOUND if there is no such wallet.
func (n *Network) Wallet(name string) (*Wallet, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.wallets[name]; !ok {
		return nil, walletErr(payments.CodeNotFound, "no wallet %q in the simulator", name)
	}
	return &Wallet{net: n, name: name}, nil
}

// OnSettle calls f, synchronously, after every payment the network makes.
// f must not call back into the network's paying methods. The returned
// function stops the calls.
func (n *Network) OnSettle(f func(Settlement)) (stop func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	id := n.nextW
	n.nextW++
	n.watchers[id] = f
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		delete(n.watchers, id)
	}
}

// Balance returns the balance of wallet name in msat.
func (n *Network) Balance(name string) (int64, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	w, ok := n.wallets[name]
	if !ok {
		return 0, walletErr(payments.CodeNotFound, "no wallet %q in the simulator", name)
	}
	return w.Balance, nil
}

// NodeID returns the public key (compressed, hex) of wallet name's node:
// the payee of its invoices.
func (n *Network) NodeID(name string) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	w, ok := n.wallets[name]
	if !ok {
		return "", walletErr(payments.CodeNotFound, "no wallet %q in the simulator", name)
	}
	return hex.EncodeToString(w.key.PubKey().SerializeCompressed()), nil
}

// MakeInvoice has wallet name issue an invoice for amountMsat (at least 1)
// that expires after expiry (rounded up to a second; zero means one hour).
func (n *Network) MakeInvoice(name string, amountMsat int64, description string, expiry time.Duration) (payments.Invoice, error) {
	return n.makeInvoice(name, amountMsat, description, nil, expiry)
}

// MakeInvoiceHashed is MakeInvoice for an invoice that commits to its
// description by its SHA-256 only (BOLT 11's h field), as an LNURL-pay
// server's do (LUD-06, NIP-57: the hash of the metadata or zap request).
func (n *Network) MakeInvoiceHashed(name string, amountMsat int64, descriptionHash [32]byte, expiry time.Duration) (payments.Invoice, error) {
	return n.makeInvoice(name, amountMsat, "", &descriptionHash, expiry)
}

func (n *Network) makeInvoice(name string, amountMsat int64, description string, descHash *[32]byte, expiry time.Duration) (payments.Invoice, error) {
	if amountMsat <= 0 || amountMsat > bolt11.MaxAmountMsat {
		return payments.Invoice{}, walletErr(payments.CodeOther, "invoice amount %d msat is out of range", amountMsat)
	}
	if expiry <= 0 {
		expiry = bolt11.DefaultExpiry
	}
	secs := uint64((expiry + time.Second - 1) / time.Second)
	var preimage, secret [32]byte
	if _, err := rand.Read(preimage[:]); err != nil {
		return payments.Invoice{}, err
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return payments.Invoice{}, err
	}
	now := n.opts.Now().Truncate(time.Second)
	inv := bolt11.Invoice{
		Currency: bolt11.Regtest, Amount: amountMsat, Timestamp: now,
		Hash: sha256.Sum256(preimage[:]), Secret: &secret, Description: description,
		ExpirySeconds: secs, Features: []int{8, 14, 17}, // var_onion_optin, payment_secret, basic_mpp (optional)
	}
	if len(description) > 639 {
		h := sha256.Sum256([]byte(description))
		descHash = &h
	}
	if descHash != nil {
		inv.Description, inv.DescriptionHash = "", descHash
	}

	n.mu.Lock()
	defer n.mu.Unlock()
	w, ok := n.wallets[name]
	if !ok {
		return payments.Invoice{}, walletErr(payments.CodeNotFound, "no wallet %q in the simulator", name)
	}
	s, err := bolt11.Encode(inv, w.key)
	if err != nil {
		return payments.Invoice{}, walletErr(payments.CodeOther, "%v", err)
	}
	rec := &invoice{
		Payee: name, Bolt11: s, Hash: inv.PaymentHash(), Preimage: hex.EncodeToString(preimage[:]),
		Amount: amountMsat, Desc: description, Created: now.Unix(), Expires: inv.ExpiresAt().Unix(),
	}
	n.invoices[rec.Hash] = rec
	if err := n.save(); err != nil {
		delete(n.invoices, rec.Hash)
		return payments.Invoice{}, internalErr(err)
	}
	n.opts.Logger.Debug("invoice made", "wallet", name, "amount_msat", amountMsat, "payment_hash", rec.Hash)
	return rec.public(name), nil
}

// public is what wallet who may see of the invoice: the preimage only
// once it is settled.
func (i *invoice) public(who string) payments.Invoice {
	out := payments.Invoice{
		Bolt11: i.Bolt11, PaymentHash: i.Hash, AmountMsat: i.Amount, Description: i.Desc,
		CreatedAt: time.Unix(i.Created, 0), ExpiresAt: time.Unix(i.Expires, 0),
	}
	if i.Settled != 0 {
		out.SettledAt = time.Unix(i.Settled, 0)
		out.Preimage = i.Preimage
	}
	return out
}

// LookupInvoice returns the invoice with paymentHash (hex) as wallet name
// sees it: an invoice it made or paid. Any other is NOT_FOUND.
func (n *Network) LookupInvoice(name, paymentHash string) (payments.Invoice, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.wallets[name]; !ok {
		return payments.Invoice{}, walletErr(payments.CodeNotFound, "no wallet %q in the simulator", name)
	}
	i, ok := n.invoices[paymentHash]
	if !ok || (i.Payee != name && i.Payer != name) {
		return payments.Invoice{}, walletErr(payments.CodeNotFound, "no invoice with payment hash %.16s… in wallet %q", paymentHash, name)
	}
	return i.public(name), nil
}

// Direction tells whether wallet name received (made) or sent (paid) the
// invoice with paymentHash; ok is false when it did neither.
func (n *Network) Direction(name, paymentHash string) (incoming bool, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	i, found := n.invoices[paymentHash]
	switch {
	case !found:
		return false, false
	case i.Payee == name:
		return true, true
	case i.Payer == name:
		return false, true
	}
	return false, false
}

// Pay has wallet payer pay the BOLT 11 invoice s and returns the preimage,
// hex.
func (n *Network) Pay(payer, s string) (preimage string, err error) {
	decoded, err := bolt11.Decode(s)
	if err != nil {
		return "", walletErr(payments.CodePaymentFailed, "%v", err)
	}
	hash := decoded.PaymentHash()
	settled, err := n.settle(payer, s, hash)
	if err != nil {
		return "", err
	}
	n.mu.Lock()
	watchers := make([]func(Settlement), 0, len(n.watchers))
	for _, f := range n.watchers {
		watchers = append(watchers, f)
	}
	n.mu.Unlock()
	for _, f := range watchers {
		f(settled)
	}
	return settled.Invoice.Preimage, nil
}

func (n *Network) settle(payer, s, hash string) (Settlement, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	from, ok := n.wallets[payer]
	if !ok {
		return Settlement{}, walletErr(payments.CodeNotFound, "no wallet %q in the simulator", payer)
	}
	i, ok := n.invoices[hash]
	if !ok || i.Bolt11 != s {
		return Settlement{}, walletErr(payments.CodePaymentFailed, "no route: the invoice was not made on this simulated network")
	}
	now := n.opts.Now()
	switch {
	case i.Settled != 0:
		return Settlement{}, walletErr(payments.CodePaymentFailed, "invoice already paid")
	case !now.Before(time.Unix(i.Expires, 0)):
		return Settlement{}, walletErr(payments.CodePaymentFailed, "invoice expired at %s", time.Unix(i.Expires, 0).UTC().Format(time.RFC3339))
	case i.Payee == payer:
		return Settlement{}, walletErr(payments.CodePaymentFailed, "a wallet cannot pay its own invoice")
	case from.Balance < i.Amount:
		return Settlement{}, walletErr(payments.CodeInsufficientBalance, "balance %d msat is less than the %d msat asked", from.Balance, i.Amount)
	}
	to := n.wallets[i.Payee]
	from.Balance -= i.Amount
	to.Balance += i.Amount
	i.Settled, i.Payer = max(now.Unix(), 1), payer
	if err := n.save(); err != nil {
		from.Balance += i.Amount
		to.Balance -= i.Amount
		i.Settled, i.Payer = 0, ""
		return Settlement{}, internalErr(err)
	}
	n.opts.Logger.Info("simulated payment settled", "payer", payer, "payee", i.Payee, "amount_msat", i.Amount, "payment_hash", hash)
	return Settlement{Invoice: i.public(payer), Payer: payer, Payee: i.Payee}, nil
}

// Wallet is one wallet of a Network. It implements payments.Wallet; the
// context only cancels a call that has not started.
type Wallet struct {
	net  *Network
	name string
}

var _ payments.Wallet = (*Wallet)(nil)

// Name returns the wallet's name.
func (w *Wallet) Name() string { return w.name }

// Network returns the network the wallet is on.
func (w *Wallet) Network() *Network { return w.net }

// Balance returns the wallet's balance in msat.
func (w *Wallet) Balance(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return w.net.Balance(w.name)
}

// MakeInvoice implements payments.Wallet.
func (w *Wallet) MakeInvoice(ctx context.Context, amountMsat int64, description string, expiry time.Duration) (payments.Invoice, error) {
	if err := ctx.Err(); err != nil {
		return payments.Invoice{}, err
	}
	return w.net.MakeInvoice(w.name, amountMsat, description, expiry)
}

// LookupInvoice implements payments.Wallet.
func (w *Wallet) LookupInvoice(ctx context.Context, paymentHash string) (payments.Invoice, error) {
	if err := ctx.Err(); err != nil {
		return payments.Invoice{}, err
	}
	return w.net.LookupInvoice(w.name, paymentHash)
}

// PayInvoice implements payments.Wallet.
func (w *Wallet) PayInvoice(ctx context.Context, s string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return w.net.Pay(w.name, s)
}
