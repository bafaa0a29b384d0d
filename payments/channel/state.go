package channel

import (
	"fmt"
	"math"
	"time"
)

// RefundStatus is where the refund of a closed channel stands.
type RefundStatus uint8

// The refund statuses.
const (
	// RefundNone: nothing paid yet; the client's invoice is awaited.
	RefundNone RefundStatus = iota
	// RefundPending: an invoice is recorded and its payment was started;
	// until it is known to have failed, only that invoice is ever paid.
	RefundPending
	// RefundPaid: the owed amount was paid (or nothing was owed).
	RefundPaid
)

func (s RefundStatus) String() string {
	switch s {
	case RefundNone:
		return "none"
	case RefundPending:
		return "pending"
	case RefundPaid:
		return "paid"
	}
	return fmt.Sprintf("RefundStatus(%d)", uint8(s))
}

// State is a channel as its books hold it: what it was funded with, the
// last receipt accepted (Nonce and Accumulated; both 0 before the first),
// and once closed what is owed back.
type State struct {
	Channel     ID
	Epoch       uint64
	Fragment    string // the vm_id_fragment of its receipts
	Deposit     uint64 // msat, every funding payment's amount
	Accumulated uint64 // msat spent: the last accepted receipt's amount
	Nonce       uint64 // the last accepted receipt's nonce
	Ref         string // the call the last accepted receipt paid for (Accept's ref)
	Opened      time.Time
	LastUse     time.Time
	Closed      bool
	ClosedAt    time.Time
	Owed        uint64 // once closed, Deposit − Accumulated
	Refund      RefundStatus
}

// Receipt is the last accepted receipt, unsigned: the subRav of an answer.
func (s *State) Receipt() SubRAV {
	return SubRAV{
		Version:           Version,
		ChainID:           ChainLightning,
		ChannelID:         s.Channel,
		ChannelEpoch:      s.Epoch,
		VMIDFragment:      s.Fragment,
		AccumulatedAmount: s.Accumulated,
		Nonce:             s.Nonce,
	}
}

// Next is the receipt that pays price (msat) next: nonce one above the
// last, amount the last plus price. It fails with ErrClosed or
// ErrInsufficientFunds.
func (s *State) Next(price uint64) (SubRAV, error) {
	if s.Closed {
		return SubRAV{}, refuse(CodeClosed, s, "channel %s is closed", s.Channel)
	}
	if price > s.Deposit-min(s.Accumulated, s.Deposit) || s.Nonce == math.MaxUint64 {
		return SubRAV{}, refuse(CodeInsufficientFunds, s, "%d msat left of a %d msat deposit, the call costs %d",
			s.Deposit-min(s.Accumulated, s.Deposit), s.Deposit, price)
	}
	r := s.Receipt()
	r.Nonce++
	r.AccumulatedAmount += price
	return r, nil
}

// Answer is the payload of an answer to a call paid by the receipt that
// made s: the state (subRav), the price (cost) and the deposit.
func (s *State) Answer(price uint64) Payload {
	r := s.Receipt()
	return Payload{Version: Version, SubRAV: &r, Cost: Amount(price), Deposit: Amount(s.Deposit)}
}

// StateOfJSON reads the channel state of a payload in its JSON form, as
// a client stores the server's last word (MarshalPayload of Answer).
func StateOfJSON(b []byte) (State, error) {
	p, err := UnmarshalPayload(b)
	if err != nil {
		return State{}, err
	}
	return StateOf(&p)
}

// StateOf reads the channel state a server's payload (an answer or an
// error) carries: what Client.Resync takes.
func StateOf(p *Payload) (State, error) {
	if p.SubRAV == nil {
		return State{}, fmt.Errorf("%w: payload carries no subRav", ErrMalformed)
	}
	r := p.SubRAV
	if r.ChainID != ChainLightning {
		return State{}, fmt.Errorf("%w: chain %d is not Lightning's (%d)", ErrMalformed, r.ChainID, ChainLightning)
	}
	if r.AccumulatedAmount > uint64(p.Deposit) {
		return State{}, fmt.Errorf("%w: %d msat spent of a %d msat deposit", ErrMalformed, r.AccumulatedAmount, p.Deposit)
	}
	s := State{
		Channel: r.ChannelID, Epoch: r.ChannelEpoch, Fragment: r.VMIDFragment,
		Deposit: uint64(p.Deposit), Accumulated: r.AccumulatedAmount, Nonce: r.Nonce,
	}
	if p.Error != nil && p.Error.Code == CodeClosed {
		s.Closed, s.Owed = true, s.Deposit-s.Accumulated
	}
	return s, nil
}
