package contextvm

import (
	"slices"
	"testing"
)

func TestRegistry(t *testing.T) {
	var r registry[string, int] // the zero value is ready
	if _, ok := r.get("a"); ok || r.len() != 0 {
		t.Fatal("an empty registry has entries")
	}
	r.put("a", 1)
	r.put("b", 2)
	if v, ok := r.get("a"); !ok || v != 1 {
		t.Fatalf("get a = %d, %v", v, ok)
	}
	r.deleteIf("a", 9) // a was replaced: not deleted
	if _, ok := r.get("a"); !ok {
		t.Fatal("deleteIf removed what did not match")
	}
	r.deleteIf("a", 1)
	if _, ok := r.get("a"); ok {
		t.Fatal("deleteIf kept what matched")
	}
	if v, ok := r.take("b"); !ok || v != 2 {
		t.Fatalf("take b = %d, %v", v, ok)
	}
	if _, ok := r.take("b"); ok {
		t.Fatal("taken twice")
	}
	for i := range 4 {
		r.put(string(rune('a'+i)), i)
	}
	r.deleteFunc(func(_ string, v int) bool { return v%2 == 0 })
	got := r.drain()
	slices.Sort(got)
	if !slices.Equal(got, []int{1, 3}) || r.len() != 0 {
		t.Fatalf("drained %v, %d left", got, r.len())
	}
}
