package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/contextvm/replica"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/channel"
)

// capabilitiesWait bounds the read of the wallet's info event (NIP-47 kind
// 13194), which says whether the wallet may pay refunds.
const capabilitiesWait = 15 * time.Second

// collector is the CEP-8 gate that collects the prices, and its
// processor: zaps to --zap-address, or the wallet's (see gate); none
// without either. Its func releases what it opened. state is the
// gateway's store, nil in a replica group (replicas), whose bucket the
// server opens when it joins.
func (g *gatewayCmd) collector(ctx context.Context, w *wallet, p gatewayPlan, state durable.Store, replicas *replica.Group) (contextvm.Gate, payments.Processor, func(), error) {
	if g.gf.zapAddress != "" {
		if len(g.gf.cashuMints) > 0 {
			return nil, nil, nil, errors.New("--cashu-mint does not work with --zap-address yet: collect with --wallet-file, or Cashu alone")
		}
		return g.zapGate(p, state)
	}
	red, closeRed, err := g.cashuRedeemer(p)
	if err != nil {
		return nil, nil, nil, err
	}
	if w == nil && red == nil {
		return nil, nil, closeRed, nil
	}
	gate, err := g.gate(ctx, w, red, state, p, replicas)
	if err != nil {
		closeRed()
		return nil, nil, nil, err
	}
	var proc payments.Processor // nil, not a nil interface value, with Cashu alone
	if w != nil {
		proc = w.proc
	}
	return gate, proc, closeRed, nil
}

// gate is the CEP-8 gate that collects the prices with w, offering
// prepaid payment channels when it can (see channelBooks), over --http too
// (the same books); nil, not a nil *cep8.Gate, without a wallet. In a
// replica group the books are kept in the group's bucket, shared by every
// replica.
func (g *gatewayCmd) gate(ctx context.Context, w *wallet, red payments.Redeemer, state durable.Store, p gatewayPlan, replicas *replica.Group) (contextvm.Gate, error) {
	if w == nil && red == nil {
		return nil, nil
	}
	opts := cep8.Options{Rates: p.rates}
	if red != nil {
		opts.Redeemers = []payments.Redeemer{red}
	}
	if w == nil {
		return cep8.NewGate(opts), nil
	}
	opts.Processors = []payments.Processor{w.proc}
	server := p.id.secret.Public()
	if replicas != nil {
		shared, err := replicas.Store(ctx, server)
		if err != nil {
			return nil, fmt.Errorf("--nats: the group's store: %w", err)
		}
		state = shared
	}
	books, why, err := g.channelBooks(ctx, w, state, server)
	switch {
	case err != nil:
		return nil, err
	case books == nil:
		g.log.Info("payment channels not offered", "pmi", channel.PMI, "reason", why)
	default:
		opts.Channels = books
		g.httpChannels = books
		g.log.Info("payment channels offered", "pmi", channel.PMI, "idle_ttl", g.gf.channelIdleTTL.String())
	}
	return cep8.NewGate(opts), nil
}

// channelBooks are the gateway's channels, kept in state, the one store of
// the gateway (of the replica group with --nats: a channel's receipts are
// swapped into it, so that the replicas never both accept one), when it
// offers them: with a Lightning (NWC) wallet that may pay_invoice (refunds
// are paid from it), unless --channels=false. Otherwise they are nil and
// why says why not.
func (g *gatewayCmd) channelBooks(ctx context.Context, w *wallet, state durable.Store, server nostr.PubKey) (books *channel.Books, why string, err error) {
	switch {
	case !g.gf.channels:
		return nil, "switched off (--channels=false or payments.channels = false)", nil
	case w.nwc == nil:
		return nil, "the wallet is not a Lightning (NIP-47) wallet", nil
	}
	cctx, cancel := context.WithTimeout(ctx, capabilitiesWait)
	caps, err := w.nwc.Capabilities(cctx)
	cancel()
	switch {
	case err != nil:
		return nil, "the wallet's info event (NIP-47 kind 13194), which says whether it may pay refunds, could not be read: " + err.Error(), nil
	case !caps.CanPay():
		return nil, "the wallet may not pay_invoice, which refunds need (its info event lists: " + strings.Join(caps.Methods, " ") + ")", nil
	}
	books, err = channel.New(channel.Options{Store: state, ServerKey: server[:], Refunder: channel.WalletRefunder{Wallet: w.nwc},
		IdleTTL: g.gf.channelIdleTTL, Log: g.log})
	return books, "", err
}
