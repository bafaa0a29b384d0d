package nwc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments"
)

// ErrNoAnswer is wrapped by the error of a request the wallet did not
// answer in time (or that no wallet service was listening for).
var ErrNoAnswer = errors.New("no answer from the wallet service")

// ClientOptions configure a Client.
type ClientOptions struct {
	// Pool is the relay pool to use; nil makes one on the URI's relays,
	// closed by Close.
	Pool *nostrx.Pool
	// Timeout bounds one request, from publication to answer (default
	// 30 s); the context may end it sooner.
	Timeout time.Duration
	Logger  *slog.Logger
}

// Client talks to a wallet service over NIP-47. It implements
// payments.Wallet. It is safe for concurrent use.
type Client struct {
	uri     URI
	pool    *nostrx.Pool
	ownPool bool
	timeout time.Duration
	log     *slog.Logger

	mu   sync.Mutex
	caps *Capabilities // the wallet's info event, once read

	notes listener  // the wallet's notifications (notify.go)
	resp  responses // the wallet's responses (responses.go)
	keys  *keys     // the connection's, to the wallet service
}

var _ payments.Wallet = (*Client)(nil)

// NewClient returns a client of the wallet service of uri.
func NewClient(uri URI, opts ClientOptions) *Client {
	c := &Client{uri: uri, pool: opts.Pool, timeout: opts.Timeout, log: opts.Logger, keys: newKeys(uri.secret, uri.Wallet)}
	if c.timeout <= 0 {
		c.timeout = 30 * time.Second
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.pool == nil {
		c.pool = nostrx.NewPool(nostrx.PoolOptions{Relays: uri.Relays, Logger: c.log})
		c.ownPool = true
	}
	return c
}

// Close stops listening to the wallet's notifications and releases the
// client's own pool, if it made one.
func (c *Client) Close() error {
	c.notes.close()
	c.resp.close()
	if c.ownPool {
		return c.pool.Close()
	}
	return nil
}

// Capabilities are what a wallet service announces in its kind 13194 info
// event.
type Capabilities struct {
	Methods       []string
	Encryptions   []string // empty when the event has no encryption tag: NIP-04 only
	Notifications []string
	// notificationsTag: the info event has a notifications tag.
	notificationsTag bool
}

// CanPay reports whether the wallet lets this connection pay invoices
// (pay_invoice among its methods): a receive-only connection does not.
func (c Capabilities) CanPay() bool { return slices.Contains(c.Methods, MethodPayInvoice) }

// Encryption is the scheme a client uses with this wallet: NIP-44 if the
// wallet lists it, otherwise NIP-04 (also when it has no encryption tag).
func (c Capabilities) Encryption() (string, error) {
	switch {
	case len(c.Encryptions) == 0:
		return EncryptionNIP04, nil
	case slices.Contains(c.Encryptions, EncryptionNIP44):
		return EncryptionNIP44, nil
	case slices.Contains(c.Encryptions, EncryptionNIP04):
		return EncryptionNIP04, nil
	}
	return "", &payments.WalletError{Code: payments.CodeUnsupportedEncryption,
		Message: fmt.Sprintf("the wallet offers only %s; this client speaks %s and %s", strings.Join(c.Encryptions, ", "), EncryptionNIP44, EncryptionNIP04)}
}

// Capabilities returns the wallet's info event, read once from the relays
// and remembered.
func (c *Client) Capabilities(ctx context.Context) (Capabilities, error) {
	c.mu.Lock()
	if c.caps != nil {
		defer c.mu.Unlock()
		return *c.caps, nil
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	events, err := c.pool.Query(ctx, nostr.Filter{Kinds: []nostr.Kind{KindInfo}, Authors: []nostr.PubKey{c.uri.Wallet}})
	if err != nil {
		return Capabilities{}, fmt.Errorf("nwc: reading the wallet's info event: %w", err)
	}
	if len(events) == 0 {
		return Capabilities{}, fmt.Errorf("nwc: %w: the wallet %s has published no info event (kind 13194) on %s",
			ErrNoAnswer, c.uri.Wallet.Hex(), strings.Join(c.uri.Relays, ", "))
	}
	latest := events[0]
	for _, e := range events[1:] {
		if e.CreatedAt > latest.CreatedAt {
			latest = e
		}
	}
	caps := Capabilities{Methods: strings.Fields(latest.Content)}
	if t := latest.Tags.Find("encryption"); len(t) >= 2 {
		caps.Encryptions = strings.Fields(t[1])
	}
	if t := latest.Tags.Find("notifications"); len(t) >= 2 {
		caps.Notifications, caps.notificationsTag = strings.Fields(t[1]), true
	}
	c.mu.Lock()
	c.caps = &caps
	c.mu.Unlock()
	return caps, nil
}

// call sends one request and returns its result, or the wallet's error as
// a *payments.WalletError.
func (c *Client) call(ctx context.Context, method string, params, result any) error {
	caps, err := c.Capabilities(ctx)
	if err != nil {
		return err
	}
	scheme, err := caps.Encryption()
	if err != nil {
		return err
	}
	body, err := json.Marshal(map[string]any{"method": method, "params": params})
	if err != nil {
		return err
	}
	content, err := c.keys.encrypt(scheme, string(body))
	if err != nil {
		return fmt.Errorf("nwc: encrypt: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	evt := nostr.Event{
		Kind:      KindRequest,
		CreatedAt: nostr.Now(),
		Tags: nostr.Tags{
			{"p", c.uri.Wallet.Hex()},
			{"encryption", scheme},
			{"expiration", strconv.FormatInt(deadline.Unix()+1, 10)},
		},
		Content: content,
	}
	if err := c.keys.sign(&evt); err != nil {
		return err
	}
	answers, end, err := c.await(ctx, evt.ID)
	if err != nil {
		return fmt.Errorf("nwc: %s: %w", method, err)
	}
	defer end()
	if err := c.pool.Publish(ctx, evt); err != nil {
		if errors.Is(err, nostrx.ErrUnheard) {
			return fmt.Errorf("nwc: %s: %w: the wallet service is not listening on %s", method, ErrNoAnswer, strings.Join(c.uri.Relays, ", "))
		}
		return fmt.Errorf("nwc: %s: publish: %w", method, err)
	}
	c.log.Debug("nwc request sent", "method", method, "encryption", scheme, "id", evt.ID.Hex())
	for {
		select {
		case resp, ok := <-answers:
			if !ok {
				return fmt.Errorf("nwc: %s: subscription closed", method)
			}
			if err := c.readResponse(resp, scheme, method, result); !errors.Is(err, errSkip) {
				return err
			}
		case <-ctx.Done():
			return fmt.Errorf("nwc: %s: %w within %v: %w", method, ErrNoAnswer, c.timeout, context.Cause(ctx))
		}
	}
}

var errSkip = errors.New("not an answer")

func (c *Client) readResponse(evt nostr.Event, scheme, method string, result any) error {
	plain, err := c.keys.decrypt(scheme, evt.Content)
	if err != nil {
		// A wallet that refused our scheme may answer in the other one.
		other := EncryptionNIP04
		if scheme == EncryptionNIP04 {
			other = EncryptionNIP44
		}
		if plain, err = c.keys.decrypt(other, evt.Content); err != nil {
			c.log.Info("nwc: undecryptable response ignored", "id", evt.ID.Hex())
			return errSkip
		}
	}
	resp, err := DecodeResponse([]byte(plain))
	if err != nil {
		return fmt.Errorf("nwc: %s: %w", method, err)
	}
	if resp.Error != nil {
		return &payments.WalletError{Code: resp.Error.Code, Message: resp.Error.Message}
	}
	if resp.ResultType != method {
		return fmt.Errorf("nwc: %s: the wallet answered with a %s result", method, resp.ResultType)
	}
	if err := json.Unmarshal(resp.Result, result); err != nil {
		return fmt.Errorf("nwc: %s: malformed result: %w", method, err)
	}
	return nil
}

// GetInfo returns the wallet's get_info answer.
func (c *Client) GetInfo(ctx context.Context) (Info, error) {
	var info Info
	err := c.call(ctx, MethodGetInfo, struct{}{}, &info)
	return info, err
}

// GetBalance returns the wallet's balance in msat.
func (c *Client) GetBalance(ctx context.Context) (int64, error) {
	var r struct {
		Balance int64 `json:"balance"`
	}
	err := c.call(ctx, MethodGetBalance, struct{}{}, &r)
	return r.Balance, err
}

// MakeInvoice implements payments.Wallet with make_invoice.
func (c *Client) MakeInvoice(ctx context.Context, amountMsat int64, description string, expiry time.Duration) (payments.Invoice, error) {
	params := map[string]any{"amount": amountMsat, "description": description}
	if expiry > 0 {
		params["expiry"] = int64((expiry + time.Second - 1) / time.Second)
	}
	var tx Transaction
	if err := c.call(ctx, MethodMakeInvoice, params, &tx); err != nil {
		return payments.Invoice{}, err
	}
	return tx.PaymentsInvoice(), nil
}

// LookupInvoice implements payments.Wallet with lookup_invoice.
func (c *Client) LookupInvoice(ctx context.Context, paymentHash string) (payments.Invoice, error) {
	var tx Transaction
	if err := c.call(ctx, MethodLookupInvoice, map[string]string{"payment_hash": paymentHash}, &tx); err != nil {
		return payments.Invoice{}, err
	}
	return tx.PaymentsInvoice(), nil
}

// PayInvoice implements payments.Wallet with pay_invoice.
func (c *Client) PayInvoice(ctx context.Context, bolt11 string) (string, error) {
	var r struct {
		Preimage string `json:"preimage"`
	}
	if err := c.call(ctx, MethodPayInvoice, map[string]string{"invoice": bolt11}, &r); err != nil {
		return "", err
	}
	if r.Preimage == "" {
		return "", errors.New("nwc: pay_invoice: the wallet returned no preimage")
	}
	return r.Preimage, nil
}

// PaymentsInvoice converts a NIP-47 transaction to a payments.Invoice. A
// transaction is settled when its state says so or it has a settled_at.
func (t Transaction) PaymentsInvoice() payments.Invoice {
	inv := payments.Invoice{
		Bolt11: t.Invoice, PaymentHash: t.PaymentHash, AmountMsat: t.Amount, Description: t.Description,
		Preimage: t.Preimage,
	}
	if t.CreatedAt > 0 {
		inv.CreatedAt = time.Unix(t.CreatedAt, 0)
	}
	if t.ExpiresAt > 0 {
		inv.ExpiresAt = time.Unix(t.ExpiresAt, 0)
	}
	switch {
	case t.SettledAt > 0:
		inv.SettledAt = time.Unix(t.SettledAt, 0)
	case t.State == transactionStateSettled:
		inv.SettledAt = time.Unix(max(t.CreatedAt, 1), 0)
	}
	return inv
}
