// Package lightning is the payment method "bitcoin-lightning-bolt11"
// (CEP-21) over a payments.Wallet, usually a Nostr Wallet Connect client
// (package payments/nwc): a Processor for the server that is paid and a
// Handler for the client that pays. Prices are in sats; the wallet works
// in millisatoshis (sats × 1000).
//
// A Processor settles a payment on the wallet's word that it was received
// when the wallet gives it (a Notifier: NIP-47 notifications, notify.go),
// and by looking the invoice up (lookup_invoice) otherwise, or when that
// word is late. It keeps an invoice made ahead for each price it was asked
// for (prepare.go), so that a payment request does not wait for the
// wallet.
//
// The Handler pays a zap invoice (package payments/zap) as any other,
// checking it against the zap request shown beside it, if any.
//
// Files: lightning.go (the Processor and the Handler: issuing, verifying and
// paying invoices), notify.go (the Notifier seam and the Processor's
// listening for payments), prepare.go (invoices made ahead, per price).
package lightning
