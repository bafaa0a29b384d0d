package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/durable/natskv"
	"github.com/cvmgo/cvm/internal/natsx"
	"github.com/cvmgo/cvm/internal/natsx/natstest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/payments/channel"
)

// Two gateways of one replica group, each with its own books on the
// group's NATS bucket (through a connection of its own, as two processes),
// sell the same channel over HTTP.

// rendezvous makes the two replicas' reads of one channel meet: armed,
// the first two reads wait for each other, so that both replicas act on
// the same state of the channel before either records anything: the race
// every round, not only when the scheduler makes it.
type rendezvous struct {
	mu      sync.Mutex
	id      channel.ID
	waiting int
	met     chan struct{}
}

// arm makes the next two reads of channel id meet.
func (r *rendezvous) arm(id channel.ID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.id, r.waiting, r.met = id, 2, make(chan struct{})
}

// meet waits, when key is the armed channel's, for the other read; at
// most a while, so that a replica that never reads fails the test rather
// than hanging it.
func (r *rendezvous) meet(ctx context.Context, key []byte) {
	r.mu.Lock()
	if r.waiting == 0 || !bytes.Equal(key, r.id[:]) {
		r.mu.Unlock()
		return
	}
	r.waiting--
	met := r.met
	if r.waiting == 0 {
		close(met)
	}
	r.mu.Unlock()
	wait, cancel := context.WithTimeout(ctx, testwait.Timeout(patience))
	defer cancel()
	select {
	case <-met:
	case <-wait.Done():
	}
}

// meetingStore is a replica's store whose reads of the channel's record
// meet the other replica's (see rendezvous).
type meetingStore struct {
	durable.Swapper
	r *rendezvous
}

func (s meetingStore) Get(ctx context.Context, space string, key []byte) ([]byte, bool, error) {
	v, ok, err := s.Swapper.Get(ctx, space, key)
	s.r.meet(ctx, key)
	return v, ok, err
}

// replicaPair is a channel bench and a second replica of its group on one
// embedded NATS, their reads of a channel meeting when armed.
func replicaPair(t *testing.T) (b, r *channelBench, meet *rendezvous) {
	t.Helper()
	ns := natstest.Start(t)
	meet = &rendezvous{}
	bucket := func() durable.Store {
		conn, err := natsx.Connect(t.Context(), ns.URL(), natsx.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conn.Close)
		s, err := natskv.Open(t.Context(), conn.JS, "cvm-replicas-test", natskv.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return meetingStore{s, meet}
	}
	b = newChannelBenchOn(t, true, nil, bucket())
	return b, b.replica(t, bucket()), meet
}

// resend sends the call again, refused with a conflict (or as a
// duplicate: the same receipt made for two calls), with the receipt that
// follows the state the refusal carries, and wants it run.
func resend(t *testing.T, raw *rawChannel, resp *http.Response, ref string) {
	t.Helper()
	p, err := channel.DecodeHeader(resp.Header.Get(channel.Header))
	if err != nil || p.Error == nil || (p.Error.Code != channel.CodeConflict && p.Error.Code != channel.CodeDuplicate) {
		t.Fatalf("the losing call: HTTP %d, payload %+v (%v); want a conflict with the state", resp.StatusCode, p, err)
	}
	st, err := channel.StateOf(&p)
	if err != nil {
		t.Fatal(err)
	}
	next, err := st.Next(10_000)
	if err != nil {
		t.Fatal(err)
	}
	if again, body := raw.post(translateCall, raw.header(next, ref)); again.StatusCode != http.StatusOK {
		t.Fatalf("the call resent with the state it was given: HTTP %d %s", again.StatusCode, body)
	}
}

// TestChannelHTTP_ReplicasRacingReceipts: two calls on one channel, each
// on its own replica with a receipt made from the same state, race: one
// runs, the other is told to resend (409, the state that won) and runs
// when it does. Every call runs paid: the books hold one receipt per
// run, the price of each, never two runs on one receipt.
func TestChannelHTTP_ReplicasRacingReceipts(t *testing.T) {
	b, r, meet := replicaPair(t)
	signer := newSigner(t)
	st := b.openOne(t, signer, 1000)
	raws := []*rawChannel{newRawChannel(t, b.ep.URL, signer), newRawChannel(t, r.ep.URL, signer)}
	const rounds = 10
	for round := range rounds {
		rav, err := st.Next(10_000)
		if err != nil {
			t.Fatal(err)
		}
		meet.arm(st.Channel)
		resps := make([]*http.Response, 2)
		var wg sync.WaitGroup
		for i, raw := range raws {
			wg.Go(func() { resps[i], _ = raw.post(translateCall, raw.header(rav, fmt.Sprintf("r%d-%d", round, i))) })
		}
		wg.Wait()
		ok := 0
		for i, resp := range resps {
			if resp.StatusCode == http.StatusOK {
				ok++
				continue
			}
			resend(t, raws[i], resp, fmt.Sprintf("r%d-%d-again", round, i))
		}
		if ok != 1 {
			t.Fatalf("round %d: %d of the two racing calls ran at once; want one, the other told to resend", round, ok)
		}
		if st, err = r.books.Get(t.Context(), signer.PublicKey().Bytes, st.Channel); err != nil {
			t.Fatal(err)
		}
	}
	runs := b.up.calls.Load() + r.up.calls.Load()
	if runs != 1+2*rounds || st.Nonce != uint64(runs) || st.Accumulated != uint64(runs)*10_000 {
		t.Fatalf("%d runs, books %+v: want %d runs, each paid by one receipt of 10000 msat", runs, st, 1+2*rounds)
	}
}

// TestChannelHTTP_ReplicasTopUpRacingAReceipt: a top-up recorded by one
// replica while a call's receipt is accepted by the other, both from the
// same state: both are applied, the deposit grows by the top-up and the
// receipt is debited, once each.
func TestChannelHTTP_ReplicasTopUpRacingAReceipt(t *testing.T) {
	b, r, meet := replicaPair(t)
	signer := newSigner(t)
	st := b.openOne(t, signer, 100)
	raw := newRawChannel(t, b.ep.URL, signer)
	client := signer.PublicKey().Bytes
	for round := range 5 {
		rav, err := st.Next(10_000)
		if err != nil {
			t.Fatal(err)
		}
		meet.arm(st.Channel)
		var wg sync.WaitGroup
		var resp *http.Response
		var body []byte
		var topUpErr error
		wg.Go(func() { resp, body = raw.post(translateCall, raw.header(rav, fmt.Sprintf("call-%d", round))) })
		wg.Go(func() {
			ctx, cancel := testwait.Context(t, patience)
			defer cancel()
			_, topUpErr = r.books.TopUp(ctx, st.Channel, channel.Funding{PaymentHash: [32]byte{byte(round + 1)}, AmountMsat: 50_000,
				Client: client, Fragment: st.Fragment})
		})
		wg.Wait()
		if resp.StatusCode != http.StatusOK || topUpErr != nil {
			t.Fatalf("round %d: the call: HTTP %d %s; the top-up: %v; want both", round, resp.StatusCode, body, topUpErr)
		}
		if st, err = b.books.Get(t.Context(), client, st.Channel); err != nil {
			t.Fatal(err)
		}
		if want := uint64(100_000 + 50_000*(round+1)); st.Deposit != want || st.Nonce != uint64(round+2) || st.Accumulated != st.Nonce*10_000 {
			t.Fatalf("round %d: books %+v; want a deposit of %d and %d receipts of 10000 msat", round, st, want, round+2)
		}
	}
	if runs := b.up.calls.Load(); runs != 6 {
		t.Fatalf("%d runs, want 6, each paid", runs)
	}
}
