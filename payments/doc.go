// Package payments is the transport-neutral payment layer of cvm: what a
// priced request costs (a Pricer), how a server asks for and verifies a
// payment (a Processor, one per payment method, PMI, which may also be a
// Checker that looks once without waiting), and how a client pays (a
// Handler, one per PMI). ContextVM (CEP-8) and MCP over HTTP
// (seed 003) put their own wire on top of the same pieces.
//
// The one payment method built in is Lightning, PMI
// "bitcoin-lightning-bolt11" (CEP-21): its processor and handler work
// through a Wallet, which Nostr Wallet Connect (package payments/nwc)
// implements, against a real wallet or the offline simulator (package
// payments/lnsim). The same invoices can be collected with no wallet
// connection, as NIP-57 zaps to a Lightning address (package payments/zap).
//
// A price may be announced in usd; nothing is paid in it. Where a payment
// is asked for, the server converts it into sats at its Rates, rounded up
// to a whole sat, and states that amount; a client converts the same price
// at its own Rates and pays at most a tolerance above it (convert.go;
// package payments/usdrate fetches a rate).
//
// Files: payments.go (Charge, PaymentRequired and the Processor, Checker and
// Handler seams), pricer.go (Cap, Quote and the Pricer), convert.go (usd
// prices into sats: Rates, the rounding, the client's tolerance), budget.go (a
// client's Budget, its daily totals in a shared file), wallet.go (the Wallet
// seam of Lightning and what a wallet answers), direct.go (direct payments,
// CEP-8's direct_payment: a bearer asset in the request, the Redeemer that
// takes it on the server, the Bearer that pays it on the client, and the
// RejectedError that says a payload was not consumed), fake.go (the Fake
// payment method and its Ledger, for tests and demos only), fakecash.go
// (its bearer twin, fake cash notes of a FakeMint paid by a FakeWallet and
// redeemed with change by a FakeRedeemer, for tests and demos only). The real methods live in
// packages of their own (payments/lightning); the fake one moves no money
// and needs nothing beyond this package.
package payments
