package waitbuf

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWaitFor_ReturnsWhenEverythingWasWritten(t *testing.T) {
	var b Buffer
	done := make(chan error, 1)
	go func() { done <- b.WaitFor(context.Background(), "first", "second") }()
	fmt.Fprintln(&b, "first")
	select {
	case err := <-done:
		t.Fatalf("returned with half of it written: %v", err)
	default:
	}
	fmt.Fprintln(&b, "second")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestWaitFor_GivesUpWithItsContext(t *testing.T) {
	var b Buffer
	b.Logger().Info("something else")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	err := b.WaitFor(ctx, "never")
	if !errors.Is(err, context.DeadlineExceeded) || b.String() == "" {
		t.Fatalf("err %v", err)
	}
}
