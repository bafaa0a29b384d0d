package wallet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/cashu"
)

// fakeProofs writes a version-1 proof file of mintURL holding n proofs of
// 1 sat that no mint signed: stored, never spent, they only make the file
// as large as a server's after n paid calls.
func fakeProofs(b *testing.B, dir, mintURL string, n int) {
	b.Helper()
	f := mintFile{Version: 1, Mint: mintURL}
	for range n {
		secret := make([]byte, 32)
		rand.Read(secret)
		f.Proofs = append(f.Proofs, cashu.Proof{Amount: 1, ID: "00aabbccddeeff00", Secret: hex.EncodeToString(secret),
			C: "02" + hex.EncodeToString(secret), DLEQ: &cashu.DLEQ{E: hex.EncodeToString(secret), S: hex.EncodeToString(secret), R: hex.EncodeToString(secret)}})
	}
	data, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile((&store{dir: dir}).path(mintURL), data, 0o600); err != nil {
		b.Fatal(err)
	}
}

// supply is a client wallet that sends tokens of amount, minting more
// when it runs out; the caller stops the benchmark's timer around it.
func supply(b *testing.B, ctx context.Context, tm *testMint, w *Wallet, amount uint64) cashu.Token {
	var tok cashu.Token
	if err := w.Send(ctx, tm.url, amount, keep(&tok)); err != nil {
		if err := w.Mint(ctx, tm.url, 1<<16, tm.pay); err != nil {
			b.Fatal(err)
		}
		if err := w.Send(ctx, tm.url, amount, keep(&tok)); err != nil {
			b.Fatal(err)
		}
	}
	return tok
}

// BenchmarkRedeem is a server's direct payment: a token of 10 sats for a
// price of 5, its wallet holding no proofs or 2000 of them before.
func BenchmarkRedeem(b *testing.B) {
	for _, n := range []int{0, 2000} {
		b.Run(fmt.Sprintf("proofs=%d", n), func(b *testing.B) {
			ctx := context.Background()
			tm := startMint(b, 0)
			client := newWallet(b, b.TempDir(), nil, nil)
			dir := b.TempDir()
			if n > 0 {
				fakeProofs(b, dir, tm.url, n)
			}
			red, err := NewRedeemer(newWallet(b, dir, nil, nil), []string{tm.url})
			if err != nil {
				b.Fatal(err)
			}
			charge := payments.Charge{Amount: 5, Unit: "sats"}
			redeem := func() {
				b.StopTimer()
				enc, err := supply(b, ctx, tm, client, 10).EncodeV4()
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := red.Redeem(ctx, charge, enc); err != nil {
					b.Fatal(err)
				}
			}
			redeem() // the keysets fetched, the file read once
			b.ResetTimer()
			for range b.N {
				redeem()
			}
		})
	}
}

// BenchmarkSend is a client paying the same price again and again: proofs
// held are sent, a swap at the mint every spareCopies+1 sends.
func BenchmarkSend(b *testing.B) {
	ctx := context.Background()
	tm := startMint(b, 0)
	w := newWallet(b, b.TempDir(), nil, nil)
	if err := w.Mint(ctx, tm.url, 1<<16, tm.pay); err != nil {
		b.Fatal(err)
	}
	supply(b, ctx, tm, w, 3)
	b.ResetTimer()
	for range b.N {
		supply(b, ctx, tm, w, 3)
	}
}
