package secretfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCreate_IsPrivateAndExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "key")
	if err := Create(path, []byte("first")); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", info.Mode().Perm(), err)
	}
	if dir, _ := os.Stat(filepath.Dir(path)); dir.Mode().Perm() != 0o700 {
		t.Fatalf("directory mode %v", dir.Mode().Perm())
	}
	if err := Create(path, []byte("second")); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	if got, err := Read(path, 64); err != nil || string(got) != "first" {
		t.Fatalf("read %q, %v", got, err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
}

func TestRead_RefusesFilesOthersCanRead(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix modes")
	}
	path := filepath.Join(t.TempDir(), "key")
	os.WriteFile(path, []byte("k"), 0o644)
	if _, err := Read(path, 64); !errors.Is(err, ErrInsecure) {
		t.Fatalf("err %v, want ErrInsecure", err)
	}
	if _, err := Read(filepath.Join(t.TempDir(), "none"), 64); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestReplace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	Create(path, []byte("old"))
	if err := Replace(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if got, _ := Read(path, 64); string(got) != "new" {
		t.Fatalf("read %q", got)
	}
}

// Racing creators all end up with the one secret that won.
func TestLoadOrCreate_RacersAgree(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	var wg sync.WaitGroup
	got := make([]string, 8)
	created := make([]bool, 8)
	for i := range got {
		wg.Go(func() {
			data, c, err := LoadOrCreate(path, 64, func() ([]byte, error) { return []byte{byte('a' + i)}, nil })
			if err != nil {
				t.Error(err)
			}
			got[i], created[i] = string(data), c
		})
	}
	wg.Wait()
	n := 0
	for i := range got {
		if got[i] != got[0] {
			t.Fatalf("racers disagree: %q", got)
		}
		if created[i] {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d racers say they created the file", n)
	}
}
