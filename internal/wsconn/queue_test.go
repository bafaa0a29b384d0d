package wsconn

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestQueue_BoundsByFramesAndBytes(t *testing.T) {
	q := newQueue(3, 100)
	if err := q.push(make([]byte, 500)); err != nil {
		t.Fatalf("a single frame larger than the byte bound must fit an empty queue: %v", err)
	}
	if err := q.push(make([]byte, 1)); err != errFull {
		t.Fatalf("pushed past the byte bound: %v", err)
	}
	if got := q.take(nil); len(got) != 1 {
		t.Fatalf("took %d frames", len(got))
	}
	for i := range 3 {
		if err := q.push([]byte("x")); err != nil {
			t.Fatalf("push %d refused: %v", i, err)
		}
	}
	if err := q.push([]byte("x")); err != errFull {
		t.Fatalf("pushed past the frame bound: %v", err)
	}
	q.take(nil)
	q.close(true)
	if err := q.push(make([]byte, 1000)); err != errClosed {
		t.Fatalf("push after close: %v, want errClosed", err)
	}
	if got := q.take(nil); len(got) != 0 {
		t.Fatalf("a closed queue kept %d frames", len(got))
	}
}

func TestQueue_ZeroBoundsAreUnbounded(t *testing.T) {
	q := newQueue(0, 0)
	for i := range 10000 {
		if err := q.push(make([]byte, 1000)); err != nil {
			t.Fatalf("push %d: %v", i, err)
		}
	}
}

func TestQueue_OrderlyCloseKeepsWhatWasQueued(t *testing.T) {
	q := newQueue(0, 0)
	q.push([]byte("a"))
	q.push([]byte("b"))
	q.close(false)
	if err := q.push([]byte("c")); err != errClosed {
		t.Fatalf("push after close: %v", err)
	}
	got := q.take(nil)
	if len(got) != 2 || string(got[0]) != "a" || string(got[1]) != "b" {
		t.Fatalf("took %q, want [a b]", got)
	}
}

func TestQueue_PushWaitWaitsForTheWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(1, 0)
		q.push([]byte("first"))
		done := make(chan error)
		go func() { done <- q.pushWait([]byte("second"), time.Minute) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("pushWait returned %v with the queue still full", err)
		default:
		}
		q.take(nil) // the writer makes room
		if err := <-done; err != nil {
			t.Fatalf("pushWait after room was made: %v", err)
		}
		if got := q.take(nil); len(got) != 1 || string(got[0]) != "second" {
			t.Fatalf("took %q", got)
		}
	})
}

func TestQueue_PushWaitGivesUpAfterItsWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(1, 0)
		q.push([]byte("first"))
		start := time.Now()
		if err := q.pushWait([]byte("second"), 2*time.Second); err != errFull {
			t.Fatalf("pushWait on a queue nobody drains: %v, want errFull", err)
		}
		if waited := time.Since(start); waited != 2*time.Second {
			t.Fatalf("waited %v, want 2s", waited)
		}
	})
}

func TestQueue_CloseWakesWaitingPushers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(1, 0)
		q.push([]byte("first"))
		done := make(chan error)
		go func() { done <- q.pushWait([]byte("second"), time.Minute) }()
		synctest.Wait()
		start := time.Now()
		q.close(true)
		if err := <-done; !errors.Is(err, errClosed) {
			t.Fatalf("waiting push after close: %v, want errClosed (not a slow consumer)", err)
		}
		if time.Since(start) != 0 {
			t.Fatal("the waiting push outlived close")
		}
	})
}

// A wait for room that ends because the queue was drained must find it
// still there after another pusher took part of it.
func TestQueue_PushWaitRechecksAfterWaking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(1, 0)
		q.push([]byte("first"))
		results := make(chan error, 2)
		for range 2 {
			go func() { results <- q.pushWait([]byte("w"), time.Second) }()
		}
		synctest.Wait()
		q.take(nil) // room for one
		synctest.Wait()
		if err := <-results; err != nil {
			t.Fatalf("first waiter: %v", err)
		}
		if err := <-results; err != errFull {
			t.Fatalf("second waiter: %v, want errFull after its wait", err)
		}
	})
}
