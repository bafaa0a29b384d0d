package main

import (
	"crypto/sha256"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"fiatjaf.com/nostr"
)

//go:noinline
func burnVerify(n int) {
	evt := nostr.Event{Kind: 1, Content: "x", CreatedAt: nostr.Now()}
	evt.Sign(nostr.Generate())
	for range n {
		evt.VerifySignature()
	}
}

//go:noinline
func burnRest(n int) {
	var h [32]byte
	for range n {
		h = sha256.Sum256(h[:])
	}
}

// burnCPU calls burn in batches until the calling thread has used d of
// CPU. CPU, not wall time, so a busy machine does not shorten it; not a
// count of calls, whose cost varies by backend (libsecp256k1 verifies four
// times faster than Go) and by -race; and the thread's own, not the
// process's: the garbage collector's workers run on other threads, and
// under load their CPU, counted in, cut verify's phase to a tenth of the
// profile (CI, two busy loops: verify 40 ms, runtime 190 ms of 600 ms).
func burnCPU(t *testing.T, d time.Duration, burn func(n int), batch int) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := threadCPU(t)
	for threadCPU(t)-start < d {
		burn(batch)
	}
}

// threadCPU is the CPU time (user and system) the calling thread has used
// (see rusageWho).
func threadCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageWho, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The parser reads Go's own profiles, and the classifier puts the CPU of
// VerifySignature under verify and the rest under rest.
func TestProfileCPU(t *testing.T) {
	b, err := profileCPU(1, "", func() error {
		// CPU of the burning thread, about 30 profile samples for 0.3 s:
		// either share far from the 10% wanted below. Verify gets twice
		// the rest's: on the libsecp256k1 build its time is in C, and a
		// loaded machine's profile puts part of those samples elsewhere
		// (with equal times, verify fell to 11% in 12 loaded runs).
		burnCPU(t, 600*time.Millisecond, burnVerify, 200)
		burnCPU(t, 300*time.Millisecond, burnRest, 20_000)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.CPUPerCallUs < 100e3 {
		t.Fatalf("profiled %.0f µs of CPU, want several hundred thousand", b.CPUPerCallUs)
	}
	t.Logf("breakdown %v of %.0f µs", b.Us, b.CPUPerCallUs)
	if b.Us["verify"] < 0.1*b.CPUPerCallUs || b.Us["rest"] < 0.1*b.CPUPerCallUs {
		t.Fatalf("breakdown %v: want both verify and rest to have a share", b.Us)
	}
}

func TestClassify(t *testing.T) {
	for want, frames := range map[string][]string{
		"verify":       {"crypto/sha256.block", "fiatjaf.com/nostr.(*Event).CheckID", "github.com/cvmgo/cvm/relay.(*conn).readLoop.func1"},
		"json":         {"runtime.mallocgc", "encoding/json.Unmarshal", "github.com/modelcontextprotocol/go-sdk/mcp.(*ClientSession).CallTool"},
		"mcp-sdk":      {"runtime.mapassign", "github.com/modelcontextprotocol/go-sdk/mcp.(*ClientSession).CallTool"},
		"ecdh+encrypt": {"golang.org/x/crypto/chacha20.(*Cipher).XORKeyStream", "fiatjaf.com/nostr/nip44.Encrypt"},
		"runtime":      {"runtime.scanobject", "runtime.gcBgMarkWorker"},
		"rest":         {"runtime.mallocgc", "github.com/cvmgo/cvm/contextvm.(*Server).route"},
	} {
		if got := classify(frames); got != want {
			t.Errorf("classify(%s) = %s, want %s", strings.Join(frames, " < "), got, want)
		}
	}
}
