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
// payments/lnsim).
package payments
