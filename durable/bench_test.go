package durable

import (
	"encoding/binary"
	"testing"
	"time"
)

// BenchmarkClaim is the cost a request pays for its replay guard.
func BenchmarkClaim(b *testing.B) {
	exp := time.Now().Add(time.Hour)
	run := func(b *testing.B, s Store) {
		key := make([]byte, 32)
		i := uint64(0)
		for b.Loop() {
			i++
			binary.LittleEndian.PutUint64(key, i)
			if _, err := s.Claim(ctx, "replay", key, exp); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("memory", func(b *testing.B) { s := NewMemory(Options{MaxRecords: 1 << 30}); defer s.Close(); run(b, s) })
	b.Run("file", func(b *testing.B) {
		s, err := Open(b.TempDir(), "state", Options{MaxRecords: 1 << 30})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		run(b, s)
	})
}
