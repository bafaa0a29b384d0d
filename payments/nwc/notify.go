package nwc

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments"
)

// noticeKeep is how long the notice of a payment is kept once heard, for
// the one who waits for it: that wait starts when the payment request has
// been recorded and sent, which may be after a quick payer has paid.
const noticeKeep = 10 * time.Minute

// maxNotices bounds the notices kept: beyond it the oldest go (their
// waiters, if any, then settle by lookup_invoice).
const maxNotices = 4096

// listenTimeout bounds the wait for a relay to confirm the notification
// subscription (EOSE, in milliseconds from a relay that works), and
// listenRetry how long a client that could not listen looks payments up
// before it tries again: a paid call must not wait for a relay that does
// not answer.
const (
	listenTimeout = 5 * time.Second
	listenRetry   = time.Minute
)

// ErrNotListening is wrapped by Received when the client does not listen
// to the wallet's notifications (Listen was not called, or reported that
// the wallet sends none).
var ErrNotListening = errors.New("nwc: not listening to the wallet's notifications")

// listener is a Client's one subscription to its wallet's notifications,
// shared by every payment awaited, and the notices it heard, by payment
// hash. The subscription's reader is owned by the Client: Close ends it.
type listener struct {
	start sync.Mutex // held while the subscription is being opened

	mu      sync.Mutex
	running bool          // the reader runs; guarded by mu
	retryAt time.Time     // after a failed Listen: when to try again
	stop    chan struct{} // closed by Close
	done    chan struct{} // closed when the reader ends; nil before it starts
	notices map[string]*notice
	order   []string // payment hashes in the order they were added
}

// notice is what the wallet said of one payment, or a waiter's place
// until it says it.
type notice struct {
	heard chan struct{} // closed once the notice is heard
	inv   payments.Invoice
	until time.Time
}

// Notifies reports whether the wallet sends payment_received
// notifications: its info event's notifications tag lists them, or, for a
// wallet whose info event has no such tag, its capabilities list
// "notifications".
func (c Capabilities) Notifies() bool {
	if c.notificationsTag {
		return slices.Contains(c.Notifications, NotificationReceived)
	}
	return slices.Contains(c.Methods, "notifications")
}

// notificationKind is the kind of the notifications a client speaking
// scheme reads: 23197 for NIP-44, 23196 for NIP-04.
func notificationKind(scheme string) nostr.Kind {
	if scheme == EncryptionNIP04 {
		return KindNotificationNIP04
	}
	return KindNotificationNIP44
}

// Listen makes sure the client hears the wallet's payment_received
// notifications from now on, on one subscription shared by every payment
// awaited, and reports whether the wallet sends any (false, nil: it does
// not, and payments must be looked up). It returns once a relay has
// confirmed the subscription: a notification published after that is
// heard. Call it before handing out an invoice whose payment will be
// awaited with Received: relays keep no notification for a late reader.
func (c *Client) Listen(ctx context.Context) (bool, error) {
	l := &c.notes
	l.mu.Lock()
	running := l.running
	l.mu.Unlock()
	if running {
		return true, nil
	}
	caps, err := c.Capabilities(ctx)
	if err != nil {
		return false, err
	}
	if !caps.Notifies() {
		return false, nil
	}
	scheme, err := caps.Encryption()
	if err != nil {
		return false, err
	}
	l.start.Lock()
	defer l.start.Unlock()
	l.mu.Lock()
	if l.stop == nil {
		l.stop = make(chan struct{})
	}
	running, stop, retryAt := l.running, l.stop, l.retryAt
	l.mu.Unlock()
	switch {
	case isClosed(stop):
		return false, errClosed
	case running:
		return true, nil
	case time.Now().Before(retryAt):
		return false, nil // the failure was reported; lookups meanwhile
	}
	me := c.uri.Client()
	sub := c.pool.Subscribe(nostr.Filter{
		Kinds:   []nostr.Kind{notificationKind(scheme)},
		Authors: []nostr.PubKey{c.uri.Wallet},
		Tags:    nostr.TagMap{"p": {me.Hex()}},
	}, 0)
	wctx, cancel := context.WithTimeout(ctx, min(c.timeout, listenTimeout))
	defer cancel()
	select {
	case <-sub.Ready():
	case <-stop:
		sub.Close()
		return false, errClosed
	case <-wctx.Done():
		sub.Close()
		l.mu.Lock()
		l.retryAt = time.Now().Add(listenRetry)
		l.mu.Unlock()
		return false, fmt.Errorf("nwc: listening to the wallet's notifications: %w: no relay of %s confirmed the subscription (looking payments up for %v): %w",
			ErrNoAnswer, strings.Join(c.uri.Relays, ", "), listenRetry, context.Cause(wctx))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if isClosed(stop) {
		sub.Close()
		return false, errClosed
	}
	l.running, l.done = true, make(chan struct{})
	go c.readNotifications(sub, scheme, stop, l.done)
	c.log.Debug("nwc: listening to the wallet's notifications", "wallet", c.uri.Wallet.Hex(), "kind", notificationKind(scheme))
	return true, nil
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// readNotifications reads the subscription until the client closes or the
// subscription does (its pool closed); then the next Listen opens another.
func (c *Client) readNotifications(sub *nostrx.Subscription, scheme string, stop, done chan struct{}) {
	defer close(done)
	defer sub.Close()
	defer func() {
		c.notes.mu.Lock()
		c.notes.running = false
		c.notes.mu.Unlock()
	}()
	for {
		select {
		case evt, ok := <-sub.Events():
			if !ok {
				return
			}
			tx, err := readNotification(evt, scheme, c.keys)
			switch {
			case errors.Is(err, errNotReceived):
				c.log.Debug("nwc: notification skipped", "id", evt.ID.Hex(), "err", err)
			case err != nil:
				c.log.Info("nwc: notification ignored", "id", evt.ID.Hex(), "err", err)
			default:
				c.heard(evt.ID, tx)
			}
		case <-stop:
			return
		}
	}
}

// errNotReceived marks a well-formed notification of something other than
// a payment received (payment_sent): no news for a payee.
var errNotReceived = errors.New("not a payment received")

// readNotification decrypts and checks one notification event: a kind of
// scheme, by the wallet, p-tagged to the client of sk, announcing a
// payment received with a payment hash and an amount. The pool has checked
// the signature; the rest is checked here too, as a relay may send
// anything.
func readNotification(evt nostr.Event, scheme string, k *keys) (Transaction, error) {
	wallet := k.peer
	if evt.Kind != notificationKind(scheme) {
		return Transaction{}, fmt.Errorf("kind %d, want %d", evt.Kind, notificationKind(scheme))
	}
	if evt.PubKey != wallet {
		return Transaction{}, fmt.Errorf("signed by %s, not the wallet service", evt.PubKey.Hex())
	}
	me := k.pub.Hex()
	if !slices.ContainsFunc(evt.Tags, func(t nostr.Tag) bool { return len(t) >= 2 && t[0] == "p" && t[1] == me }) {
		return Transaction{}, errors.New("not p-tagged to this connection")
	}
	plain, err := k.decrypt(scheme, evt.Content)
	if err != nil {
		return Transaction{}, fmt.Errorf("undecryptable: %w", err)
	}
	n, err := DecodeNotification([]byte(plain))
	if err != nil {
		return Transaction{}, err
	}
	if n.Type != NotificationReceived {
		return Transaction{}, fmt.Errorf("%w: %q", errNotReceived, n.Type)
	}
	tx := n.Notification
	if b, err := hex.DecodeString(tx.PaymentHash); err != nil || len(b) != 32 || strings.ToLower(tx.PaymentHash) != tx.PaymentHash {
		return Transaction{}, fmt.Errorf("payment_hash %q is not 32 bytes of lowercase hex", tx.PaymentHash)
	}
	if tx.Amount <= 0 {
		return Transaction{}, fmt.Errorf("amount %d msat is not a payment", tx.Amount)
	}
	if tx.Type != "" && tx.Type != transactionTypeIncoming {
		return Transaction{}, fmt.Errorf("payment_received of an %q transaction", tx.Type)
	}
	return tx, nil
}

// heard records the notice of a payment. The first notice of a payment
// hash is the one kept: another (a replay, from another relay or a relay
// that repeats itself) changes nothing.
func (c *Client) heard(id nostr.ID, tx Transaction) {
	inv := tx.PaymentsInvoice()
	if !inv.Settled() {
		inv.SettledAt = time.Now() // payment_received says it is
	}
	l := &c.notes
	l.mu.Lock()
	n := l.entry(tx.PaymentHash)
	replay := isClosed(n.heard)
	if !replay {
		n.inv = inv
		n.until = time.Now().Add(noticeKeep)
		close(n.heard)
	}
	l.mu.Unlock()
	if replay {
		c.log.Debug("nwc: notification of a payment already heard ignored", "id", id.Hex(), "payment_hash", tx.PaymentHash)
		return
	}
	c.log.Debug("nwc: payment received", "id", id.Hex(), "payment_hash", tx.PaymentHash, "amount_msat", tx.Amount)
}

// entry returns the notice of hash, adding it (and forgetting expired and
// excess ones) if there is none. l.mu is held.
func (l *listener) entry(hash string) *notice {
	if n, ok := l.notices[hash]; ok {
		return n
	}
	if l.notices == nil {
		l.notices = map[string]*notice{}
	}
	now := time.Now()
	drop := 0
	for _, h := range l.order {
		n, ok := l.notices[h]
		if ok && len(l.order)-drop < maxNotices && now.Before(n.until) {
			break
		}
		delete(l.notices, h)
		drop++
	}
	l.order = l.order[drop:]
	n := &notice{heard: make(chan struct{}), until: now.Add(noticeKeep)}
	l.notices[hash] = n
	l.order = append(l.order, hash)
	return n
}

// Received waits for the wallet's notification of the payment of
// paymentHash (hex) and returns the invoice as the wallet described it
// there (settled, with the amount it received), or ctx's error. A
// notification heard before the call, since Listen, counts. It wraps
// ErrNotListening if the client does not listen: see Listen.
func (c *Client) Received(ctx context.Context, paymentHash string) (payments.Invoice, error) {
	l := &c.notes
	l.mu.Lock()
	if !l.running {
		l.mu.Unlock()
		return payments.Invoice{}, ErrNotListening
	}
	n := l.entry(strings.ToLower(paymentHash))
	l.mu.Unlock()
	if isClosed(n.heard) {
		return n.inv, nil // heard already: whatever ctx says
	}
	select {
	case <-n.heard:
		return n.inv, nil
	case <-ctx.Done():
		return payments.Invoice{}, context.Cause(ctx)
	}
}

// errClosed answers a Listen on a closed client.
var errClosed = errors.New("nwc: the client is closed")

// close ends the reader, if it runs, and waits for it; a Listen under way
// gives up.
func (l *listener) close() {
	l.mu.Lock()
	if l.stop == nil {
		l.stop = make(chan struct{})
	}
	if !isClosed(l.stop) {
		close(l.stop)
	}
	done := l.done
	l.mu.Unlock()
	if done != nil {
		<-done
	}
}
