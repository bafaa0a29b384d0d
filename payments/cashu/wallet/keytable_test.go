package wallet

import (
	"testing"

	"github.com/btcsuite/btcd/btcec/v2"
)

// A key's table is built on its tableAfter-th use, and kept: the first
// signatures of a key are unblinded without one.
func TestKeyCache_TableOnceAKeyIsUsedAgain(t *testing.T) {
	c := &keyCache{mints: map[string]*mintKeys{}}
	k, _ := btcec.NewPrivateKey()
	for i := 1; i < tableAfter; i++ {
		if c.table(k.PubKey()) != nil {
			t.Fatalf("a table on use %d", i)
		}
	}
	first := c.table(k.PubKey())
	if first == nil || !first.Key().IsEqual(k.PubKey()) {
		t.Fatalf("use %d: table %v", tableAfter, first)
	}
	if again := c.table(k.PubKey()); again != first {
		t.Fatal("the table was built again")
	}
	other, _ := btcec.NewPrivateKey()
	if c.table(other.PubKey()) != nil && tableAfter > 1 {
		t.Fatal("another key's first use got a table")
	}
}
