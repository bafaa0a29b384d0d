// Package cep8 is ContextVM's payments (CEP-8) plugged into the core. On
// a server, a Gate (ServerOptions.Gate) collects the server's prices
// before a priced request runs; on a client, PayOptions.Payer
// (ClientOptions.Payer) pays what a server asks, within a budget. The
// payment rails are payments.Processor (server) and payments.Handler
// (client) implementations, and for payments carried in the request
// payments.Redeemer and payments.Bearer: a new rail plugs in there and in
// the CLI's wiring, not here.
//
// Files: gate.go (the Gate: pricing a request, issuing and verifying its
// payment, transparent and explicit gating, the charge, result and grant
// records in the server's State, replays answered from them, a lost
// replica's paid calls taken up), session.go (the payment interaction a
// client session asked for), payer.go (the client's Payer: budget, wallet
// handlers, confirmation, explicit gating's pay and send again),
// channel.go (prepaid payment channels on the gate: a request paid by a
// receipt tag, a channel opened or topped up by the transparent flow for
// its deposit, cvm/channel_close and its refund; the wire's tags, method,
// _meta key and -32050), channelpay.go (the payer's channels: receipts on
// the requests, state taken from every answer, a refused call sent again
// once, CloseChannel and ClaimRefunds), channelrecord.go (what the payer
// keeps of its channels with each server, in its store: the open one, the
// closed ones and whether their refund is still owed), usdprice.go (the
// payer's check of a usd price: the sats asked held to its own rate, within
// its tolerance, PayOptions.USDLimit, which the NIP-10 buyer over HTTP
// shares; the gate converts with payments.Cap.InSats), direct.go (CEP-8
// direct payments on the gate: the first direct_payment tag it takes,
// the payload claimed and the charge recorded before a payments.Redeemer
// redeems it, the change recorded before payment_accepted carries it,
// change no relay delivered kept for the client's next request, a
// rejection followed by the normal flow), directpay.go (the payer's direct
// payments through a payments.Bearer: a payload with a request of known
// price, one in answer to a payment_required of its PMI, the change kept
// before the call returns, a rejected payload given back). What every
// client must understand of CEP-8 (the notifications, the offer, the
// decline) is contextvm's payment.go.
package cep8
