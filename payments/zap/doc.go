// Package zap is the payment method "bitcoin-lightning-bolt11" (CEP-21)
// collected with only a Lightning address, through NIP-57 zaps: a server
// that has no wallet connection asks the address's LNURL-pay endpoint for
// an invoice bound to a zap request it signs (kind 9734), and settles the
// payment on the zap receipt (kind 9735) the endpoint publishes once the
// invoice is paid. Seed 000 names zaps as a way to verify payments; the
// reference SDK's LnBolt11ZapPaymentProcessor charges this way, and a
// client pays such an invoice as any BOLT11 invoice (payments/lightning).
//
// A receipt settles a payment only when it is signed by the endpoint's
// nostrPubkey, names this invoice, carries this zap request (its SHA-256
// the invoice's description hash) for exactly the price. The processor
// subscribes for receipts before the invoice leaves, keeps each pending
// zap in the durable store, and after a restart subscribes again from the
// zap request's time, so that a receipt published meanwhile is still
// read from the relays.
//
// Files: address.go (Lightning addresses, LUD-16), lnurl.go (the LNURL-pay
// parameters and the callback's invoice, LUD-06, fetched through an
// outbound.Fetcher), request.go (the zap request: made, and read as an
// LNURL server reads it), receipt.go (the zap receipt: made, read, and
// checked against the payment it should settle), meta.go (the zap request
// in payment_required's _meta, and the client's check of it),
// processor.go (the server's Processor), pending.go (pending zaps in the
// durable store, and the subscriptions that wait for their receipts),
// errors.go (sentinel errors).
package zap
