package main

import (
	"errors"
	"fmt"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/zap"
)

// zapGate is the CEP-8 gate of --zap-address: prices collected as zaps
// to a Lightning address, pending zaps kept in the gateway's state.
func (g *gatewayCmd) zapGate(p gatewayPlan, state durable.Store) (contextvm.Gate, payments.Processor, func(), error) {
	addr, err := zap.ParseAddress(g.gf.zapAddress)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--zap-address: %w", err)
	}
	if err := collectable(p.prices, p.rates); err != nil {
		return nil, nil, nil, err
	}
	if state == nil {
		return nil, nil, nil, errors.New("--zap-address does not work with --nats yet: collect with --wallet-file there")
	}
	fetcher, err := g.outbound()
	if err != nil {
		return nil, nil, nil, err
	}
	proc, err := zap.NewProcessor(zap.Options{
		Address: addr, Key: p.id.secret, Relays: g.gf.relays, Store: state,
		Fetcher: fetcher, Logger: g.log,
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--zap-address: %w", err)
	}
	if len(p.prices) == 0 {
		g.log.Warn("a zap address but no --price: nothing is charged")
	}
	g.log.Info("collecting prices as zaps (NIP-57)", "address", addr.String(), "relays", g.gf.relays)
	gate := cep8.NewGate(cep8.Options{Processors: []payments.Processor{proc}, Rates: p.rates})
	return gate, proc, func() { proc.Close() }, nil
}
