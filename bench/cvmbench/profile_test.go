package main

import (
	"crypto/sha256"
	"strings"
	"testing"

	"fiatjaf.com/nostr"

	"github.com/cvmgo/cvm/internal/secp"
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

// The parser reads Go's own profiles, and the classifier puts the CPU of
// VerifySignature under verify and the rest under rest.
func TestProfileCPU(t *testing.T) {
	b, err := profileCPU(1, "", func() error {
		// Work, not time: the machine may be busy. Roughly 0.3 s of CPU
		// each; libsecp256k1 verifies about four times faster, so it is
		// given more to do (CI saw 2,000 fall under the 10% share).
		verifies := 2000
		if secp.Backend == "libsecp256k1" {
			verifies = 8000
		}
		burnVerify(verifies)
		burnRest(1_000_000)
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
