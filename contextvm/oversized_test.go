package contextvm

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// framesFor builds the frames of a transfer of msg, as a sender would.
func framesFor(t testing.TB, msg string, token any, budget int, accept bool) []progressFrame {
	t.Helper()
	chunks, err := splitTwiceEscaped(msg, budget)
	if err != nil {
		t.Fatal(err)
	}
	start, cs, end := fragmentFrames(fragmentPlan{digest: digestOf(msg), totalBytes: len(msg), chunks: chunks}, testToken(t, token), accept)
	var out []progressFrame
	for _, r := range append(append([]*jsonrpc.Request{start}, cs...), end) {
		p, ok, err := parseTransferFrame(r.Params)
		if !ok || err != nil {
			t.Fatalf("frame does not parse: %v", err)
		}
		out = append(out, p)
	}
	return out
}

// testToken is the progress token v, a string or a number.
func testToken(t testing.TB, v any) mcpmsg.Token {
	t.Helper()
	tok, err := mcpmsg.TokenOf(v)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func feed(r *reassembler, peer nostr.PubKey, frames []progressFrame) (string, bool, error) {
	for _, f := range frames {
		assembled, _, done, err := r.frame(peer, f, nil)
		if err != nil || done {
			return assembled, done, err
		}
	}
	return "", false, nil
}

func bigMessage(n int) string {
	// Quotes, backslashes, non-BMP characters and control characters make
	// escaping and code-point boundaries matter.
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":1,"result":{"text":"`)
	for b.Len() < n {
		b.WriteString(`\"quoted\" 🌍 naïve \u0001 <tag> & `)
	}
	b.WriteString(`"}}`)
	return b.String()
}

func TestReassembler_RoundTrip(t *testing.T) {
	peer := nostr.Generate().Public()
	msg := bigMessage(200_000)
	for _, accept := range []bool{false, true} {
		r := newReassembler(TransferLimits{}, nil)
		frames := framesFor(t, msg, "tok", 20_000, accept)
		got, done, err := feed(r, peer, frames)
		if err != nil || !done || got != msg {
			t.Fatalf("accept=%v: done=%v err=%v equal=%v", accept, done, err, got == msg)
		}
		if n, b := r.stats(); n != 0 || b != 0 {
			t.Errorf("after completion: %d transfers, %d bytes held", n, b)
		}
	}
}

func TestReassembler_OutOfOrderWithinTheWindow(t *testing.T) {
	peer := nostr.Generate().Public()
	msg := bigMessage(50_000)
	frames := framesFor(t, msg, 7, 5_000, false)
	chunks := frames[1 : len(frames)-1]
	rand.Shuffle(len(chunks), func(i, j int) { chunks[i], chunks[j] = chunks[j], chunks[i] })
	r := newReassembler(TransferLimits{OutOfOrderWindow: 100, MaxOutOfOrder: 100}, nil)
	got, done, err := feed(r, peer, frames)
	if err != nil || !done || got != msg {
		t.Fatalf("shuffled chunks: done=%v err=%v", done, err)
	}
}

func TestReassembler_Violations(t *testing.T) {
	peer := nostr.Generate().Public()
	msg := bigMessage(30_000)
	cases := map[string]struct {
		limits TransferLimits
		edit   func([]progressFrame) []progressFrame
		want   string
	}{
		"digest mismatch": {edit: func(f []progressFrame) []progressFrame {
			d := *f[1].CVM.Data
			f[1].CVM.Data = strPtr("X" + d[1:])
			return f
		}, want: "digest"},
		"missing chunk": {edit: func(f []progressFrame) []progressFrame {
			return append(f[:2:2], f[3:]...)
		}, want: "chunks received"},
		"conflicting duplicate": {edit: func(f []progressFrame) []progressFrame {
			dup := f[1]
			cvm := *dup.CVM
			cvm.Data = strPtr("other")
			dup.CVM = &cvm
			return append([]progressFrame{f[0], f[1], dup}, f[2:]...)
		}, want: "conflicting"},
		"too many bytes":  {limits: TransferLimits{MaxBytes: 1000}, want: "exceeds the limit"},
		"too many chunks": {limits: TransferLimits{MaxChunks: 2}, want: "exceeds the limit"},
		"chunk far ahead": {limits: TransferLimits{OutOfOrderWindow: 1}, edit: func(f []progressFrame) []progressFrame {
			return append([]progressFrame{f[0], f[4]}, f[1:]...)
		}, want: "ahead of the next expected"},
		"end before chunks": {edit: func(f []progressFrame) []progressFrame {
			end := f[len(f)-1]
			end.Progress = 1
			return []progressFrame{f[0], end}
		}, want: "before its chunks"},
		"bad digest format": {edit: func(f []progressFrame) []progressFrame {
			cvm := *f[0].CVM
			cvm.Digest = "md5:abc"
			f[0].CVM = &cvm
			return f
		}, want: "digest"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			frames := framesFor(t, msg, "tok", 4_000, false)
			if tc.edit != nil {
				frames = tc.edit(frames)
			}
			r := newReassembler(tc.limits, nil)
			_, done, err := feed(r, peer, frames)
			if done || !errors.Is(err, ErrTransferRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("done=%v err=%v, want ErrTransferRefused mentioning %q", done, err, tc.want)
			}
			if n, b := r.stats(); n != 0 || b != 0 {
				t.Errorf("a refused transfer left %d transfers and %d bytes behind", n, b)
			}
		})
	}
}

func TestReassembler_AbortAndTimeout(t *testing.T) {
	peer := nostr.Generate().Public()
	expired := make(chan mcpmsg.Token, 1)
	r := newReassembler(TransferLimits{Timeout: 50 * time.Millisecond}, func(k transferKey) { expired <- k.token })
	frames := framesFor(t, bigMessage(10_000), "slow", 2_000, false)
	if _, _, _, err := r.frame(peer, frames[0], nil); err != nil {
		t.Fatal(err)
	}
	select {
	case tok := <-expired:
		if tok != mcpmsg.StringToken("slow") {
			t.Errorf("expired token %v", tok)
		}
	case <-time.After(testwait.Timeout(5 * time.Second)):
		t.Fatal("an unfinished transfer never expired")
	}
	if n, _ := r.stats(); n != 0 {
		t.Fatal("an expired transfer is still held")
	}

	r.frame(peer, frames[0], nil)
	_, _, _, err := r.frame(peer, progressFrame{ProgressToken: mcpmsg.StringToken("slow"), Progress: 2, CVM: &transferFrame{Type: oversizedType, FrameType: "abort", Reason: "changed my mind"}}, nil)
	if !errors.Is(err, ErrTransferAborted) || !strings.Contains(err.Error(), "changed my mind") {
		t.Fatalf("abort: %v", err)
	}
	if n, _ := r.stats(); n != 0 {
		t.Fatal("an aborted transfer is still held")
	}
}

// Tokens are per peer: two peers with the same token do not collide.
func TestReassembler_TokensArePerPeer(t *testing.T) {
	a, b := nostr.Generate().Public(), nostr.Generate().Public()
	r := newReassembler(TransferLimits{}, nil)
	ma, mb := bigMessage(20_000), strings.Replace(bigMessage(20_000), "quoted", "QUOTED", -1)
	fa, fb := framesFor(t, ma, 1, 3_000, false), framesFor(t, mb, 1, 3_000, false)
	var gotA, gotB string
	for i := 0; i < max(len(fa), len(fb)); i++ {
		if i < len(fa) {
			if s, _, done, err := r.frame(a, fa[i], nil); err != nil {
				t.Fatal(err)
			} else if done {
				gotA = s
			}
		}
		if i < len(fb) {
			if s, _, done, err := r.frame(b, fb[i], nil); err != nil {
				t.Fatal(err)
			} else if done {
				gotB = s
			}
		}
	}
	if gotA != ma || gotB != mb {
		t.Fatal("interleaved transfers with the same token were mixed up")
	}
}

// A flood of half-finished transfers stays within the limits: starts beyond
// them are refused, and what is held never exceeds the byte budget.
func TestReassembler_FloodStaysWithinLimits(t *testing.T) {
	// No transfer stalls out during the test: on a loaded machine the
	// thousand starts have taken longer than the default stall timeout,
	// whose expiries free slots (CI saw 968 refused).
	limits := TransferLimits{MaxConcurrent: 16, MaxPerPeer: 4, MaxBufferedBytes: 1 << 20, MaxBytes: 200_000, StallTimeout: time.Hour}
	r := newReassembler(limits, nil)
	refused := 0
	for i := range 1000 {
		peer := nostr.Generate().Public()
		if i%3 == 0 {
			peer = nostr.PubKey{1} // one busy peer
		}
		total := 100_000 + i
		start := progressFrame{ProgressToken: testToken(t, i), Progress: 1, CVM: &transferFrame{Type: oversizedType, FrameType: "start",
			Digest: digestOf("x"), TotalBytes: intPtr(total), TotalChunks: intPtr(10)}}
		if _, _, _, err := r.frame(peer, start, nil); err != nil {
			refused++
			continue
		}
		r.frame(peer, progressFrame{ProgressToken: testToken(t, i), Progress: 2, CVM: &transferFrame{Type: oversizedType, FrameType: "chunk", Data: strPtr(strings.Repeat("a", 10_000))}}, nil)
		n, held := r.stats()
		if n > limits.MaxConcurrent || held > limits.MaxBufferedBytes {
			t.Fatalf("holding %d transfers and %d bytes; limits %d and %d", n, held, limits.MaxConcurrent, limits.MaxBufferedBytes)
		}
	}
	// Bytes count as they arrive, so what bounds the starts is the slots.
	if refused < 1000-limits.MaxConcurrent {
		t.Errorf("only %d of 1000 starts refused", refused)
	}
}

// Every frame of a plan fits under the threshold, wrapped or not, whatever
// the content does to escaping.
func TestPlanFragments_FramesFitTheThreshold(t *testing.T) {
	sk := nostr.Generate()
	signer := NewKeySigner(sk)
	recipient := nostr.Generate().Public()
	tags := nostr.Tags{{"p", recipient.Hex()}, {"e", strings.Repeat("ab", 32)}}
	for _, wrap := range []nostr.Kind{0, KindGiftWrap, KindEphemeralGiftWrap} {
		for _, threshold := range []int{8_000, DefaultOversizedThreshold} {
			msg := bigMessage(150_000)
			plan, err := planFragments(msg, mcpmsg.StringToken("token-123"), tags, wrap, threshold)
			if err != nil {
				t.Fatal(err)
			}
			_, chunks, _ := fragmentFrames(plan, mcpmsg.StringToken("token-123"), false)
			for i, c := range chunks {
				content, _ := EncodeContent(c)
				evt, _ := newMessageEvent(context.Background(), signer, content, tags)
				out := evt
				if wrap != 0 {
					out, err = Wrap(evt, recipient, wrap)
					if err != nil {
						t.Fatal(err)
					}
				}
				if n := len(out.String()); n > threshold {
					t.Fatalf("wrap %d threshold %d: chunk %d is %d bytes", wrap, threshold, i, n)
				}
			}
			if strings.Join(plan.chunks, "") != msg {
				t.Fatal("chunks do not rebuild the message")
			}
		}
	}
}

func TestNIP44PaddedLen(t *testing.T) {
	// From the NIP-44 specification's padding table.
	for n, want := range map[int]int{1: 32, 32: 32, 33: 64, 37: 64, 64: 64, 65: 96, 256: 256, 257: 320, 1000: 1024, 65535: 65536} {
		if got := nip44PaddedLen(n); got != want {
			t.Errorf("padded(%d) = %d, want %d", n, got, want)
		}
	}
	// And the base64 length agrees with a real encryption.
	sk, other := nostr.Generate(), nostr.Generate().Public()
	for _, n := range []int{1, 100, 1000, 40_000} {
		e := nostr.Event{Kind: KindMessage, CreatedAt: nostr.Now(), Tags: nostr.Tags{}, Content: strings.Repeat("x", n)}
		e.Sign(sk)
		w, err := Wrap(e, other, KindGiftWrap)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(w.Content), nip44Base64Len(len(e.String())); got != want {
			t.Errorf("inner %d bytes: ciphertext %d, computed %d", len(e.String()), got, want)
		}
	}
}

func FuzzTransferFrames(f *testing.F) {
	good := framesFor(f, bigMessage(3_000), "t", 500, false)
	for _, fr := range good {
		b, _ := json.Marshal(fr)
		f.Add(string(b))
	}
	f.Add(`{"progressToken":null,"progress":1,"cvm":{"type":"oversized-transfer","frameType":"start"}}`)
	f.Add(`{"progressToken":1,"progress":-3,"cvm":{"type":"oversized-transfer","frameType":"chunk","data":"x"}}`)
	f.Add(`{"progressToken":1,"progress":1e308,"cvm":{"type":"oversized-transfer","frameType":"end"}}`)
	peer := nostr.Generate().Public()
	f.Fuzz(func(t *testing.T, params string) {
		r := newReassembler(TransferLimits{MaxBufferedBytes: 1 << 20, MaxBytes: 1 << 18}, nil)
		// A fixed good prefix, then the fuzzed frame, then the rest: whatever
		// comes in, the reassembler never panics, never holds more than its
		// budget, and completes only with the exact message.
		frames := append([]progressFrame{}, good...)
		p, ok, err := parseTransferFrame(json.RawMessage(params))
		if ok && err == nil {
			frames = append(frames[:2:2], append([]progressFrame{p}, frames[2:]...)...)
		}
		for _, fr := range frames {
			s, _, done, _ := r.frame(peer, fr, nil)
			if done && s != strings.Join([]string{}, "")+bigMessage(3_000) {
				// A completed transfer must be the one the digest names.
				if digestOf(s) != good[0].CVM.Digest {
					t.Fatal("completed a transfer whose digest does not match")
				}
			}
			if _, held := r.stats(); held > 1<<20 {
				t.Fatalf("holding %d bytes", held)
			}
		}
	})
}

func declaredStart(t testing.TB, token any, total int) progressFrame {
	return progressFrame{ProgressToken: testToken(t, token), Progress: 1, CVM: &transferFrame{Type: oversizedType, FrameType: "start",
		Digest: digestOf("x"), TotalBytes: intPtr(total), TotalChunks: intPtr(1000)}}
}

// Start frames that declare large messages and send nothing no longer lock
// anyone out: bytes count as they arrive. (Before, three starts declaring
// 100 + 100 + 56 MiB reserved the whole 256 MiB budget for five minutes.)
func TestReassembler_DeclaredSizesReserveNothing(t *testing.T) {
	r := newReassembler(TransferLimits{}, nil)
	defer r.close()
	for i := range 8 { // 8 × 32 MiB: the whole 256 MiB, were declarations reserved
		attacker := nostr.Generate().Public()
		if _, _, _, err := r.frame(attacker, declaredStart(t, i, 32<<20), nil); err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
	}
	msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"blob":"` + strings.Repeat("b", 3<<20) + `"}}}`
	got, done, err := feed(r, nostr.Generate().Public(), framesFor(t, msg, "honest", 40_000, false))
	if err != nil || !done || got != msg {
		t.Fatalf("an honest transfer after the attackers' starts: done %v, %v", done, err)
	}
	if _, _, _, err := r.frame(nostr.Generate().Public(), declaredStart(t, "big", 64<<20), nil); !errors.Is(err, ErrTransferRefused) {
		t.Fatalf("a start beyond one peer's budget: %v", err)
	}
}

// Peers the server does not serve share 1 MiB and 8 transfers when some
// capability is public, and get none when nothing is.
func TestReassembler_StrangersShareASmallBudget(t *testing.T) {
	friend := nostr.Generate().Public()
	for _, tc := range []struct {
		name  string
		class peerClass
	}{{"with public capabilities", peerStranger}, {"without", peerRefused}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReassembler(TransferLimits{}, nil)
			defer r.close()
			r.classify = func(pk nostr.PubKey) peerClass {
				if pk == friend {
					return peerTrusted
				}
				return tc.class
			}
			stranger := nostr.Generate().Public()
			_, _, _, err := r.frame(stranger, declaredStart(t, 0, 1000), nil)
			if tc.class == peerRefused {
				if !errors.Is(err, ErrTransferRefused) {
					t.Fatalf("a stranger started a transfer where nothing is public: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < 8; i++ {
				if _, _, _, err := r.frame(nostr.Generate().Public(), declaredStart(t, i, 1000), nil); err != nil {
					t.Fatalf("stranger start %d: %v", i, err)
				}
			}
			if _, _, _, err := r.frame(nostr.Generate().Public(), declaredStart(t, 8, 1000), nil); !errors.Is(err, ErrTransferRefused) {
				t.Fatalf("a ninth stranger transfer: %v", err)
			}
			if _, _, _, err := r.frame(nostr.Generate().Public(), declaredStart(t, 9, 2<<20), nil); !errors.Is(err, ErrTransferRefused) {
				t.Fatalf("a stranger declaring more than the strangers' budget: %v", err)
			}
			// Bytes: 1 MiB for all strangers together.
			r2 := newReassembler(TransferLimits{}, nil)
			defer r2.close()
			r2.classify = r.classify
			chunk := strings.Repeat("c", 600<<10)
			for i, peer := range []nostr.PubKey{nostr.Generate().Public(), nostr.Generate().Public()} {
				r2.frame(peer, progressFrame{ProgressToken: testToken(t, i), Progress: 1, CVM: &transferFrame{Type: oversizedType, FrameType: "start",
					Digest: digestOf("x"), TotalBytes: intPtr(len(chunk)), TotalChunks: intPtr(1)}}, nil)
				_, _, _, err := r2.frame(peer, progressFrame{ProgressToken: testToken(t, i), Progress: 2, CVM: &transferFrame{Type: oversizedType, FrameType: "chunk", Data: &chunk}}, nil)
				if i == 0 && err != nil {
					t.Fatalf("the first stranger's chunk: %v", err)
				}
				if i == 1 && !errors.Is(err, ErrTransferRefused) {
					t.Fatalf("strangers together beyond 1 MiB: %v", err)
				}
			}
			// The friend is not held back by the strangers.
			msg := strings.Repeat("f", 2<<20)
			if _, done, err := feed(r, friend, framesFor(t, msg, "friend", 40_000, false)); !done || err != nil {
				t.Fatalf("the friend's transfer: %v", err)
			}
		})
	}
}

// A transfer that stops sending is dropped after StallTimeout, not Timeout.
func TestReassembler_StalledTransferIsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		expired := make(chan transferKey, 1)
		r := newReassembler(TransferLimits{}, func(k transferKey) { expired <- k })
		defer r.close()
		peer := nostr.Generate().Public()
		if _, _, _, err := r.frame(peer, declaredStart(t, "slow", 1000), nil); err != nil {
			t.Fatal(err)
		}
		chunk := "abc"
		time.Sleep(25 * time.Second) // synctest clock: within the idle limit
		r.frame(peer, progressFrame{ProgressToken: testToken(t, "slow"), Progress: 2, CVM: &transferFrame{Type: oversizedType, FrameType: "chunk", Data: &chunk}}, nil)
		time.Sleep(25 * time.Second) // 50 s after the start, 25 s after the chunk: alive
		if n, _ := r.stats(); n != 1 {
			t.Fatal("a transfer that made progress was dropped")
		}
		time.Sleep(10 * time.Second) // synctest clock: 35 s after the chunk: idle
		synctest.Wait()
		select {
		case <-expired:
		default:
			t.Fatal("a transfer silent for 35 s was kept")
		}
	})
}
