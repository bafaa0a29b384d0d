package contextvm

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestLifetime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLifetime(context.Background())
		release := make(chan struct{})
		var ranToEnd bool
		if !l.Go(func(ctx context.Context) {
			<-ctx.Done() // work under way ends when the lifetime does
			<-release
			ranToEnd = true
		}) {
			t.Fatal("Go refused before close")
		}
		fired := false
		timer := l.AfterFunc(time.Second, func(context.Context) { fired = true })
		joined, cancel := l.join(context.Background())
		defer cancel()

		closed := make(chan struct{})
		go func() {
			l.close()
			close(closed)
		}()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("close returned while work was still running")
		default:
		}
		if joined.Err() == nil {
			t.Fatal("a joined context outlived the lifetime")
		}
		if l.Go(func(context.Context) { t.Error("work started after close") }) || l.enter() {
			t.Fatal("close admitted new work")
		}
		close(release)
		<-closed
		if !ranToEnd {
			t.Fatal("close returned before its work")
		}
		time.Sleep(2 * time.Second) // synctest clock: any timer left would fire
		synctest.Wait()
		if fired {
			t.Fatal("a timer fired after close")
		}
		timer.Stop()
	})
}

func TestLifetime_StopKeepsTheContext(t *testing.T) {
	l := newLifetime(context.Background())
	l.stop()
	if !l.stopping() || l.enter() {
		t.Fatal("stop admitted new work")
	}
	if l.ctx.Err() != nil {
		t.Fatal("stop cancelled the work under way")
	}
	l.close()
	if l.ctx.Err() == nil {
		t.Fatal("close did not cancel")
	}
}
