package natsx_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/natsx"
	"github.com/cvmgo/cvm/internal/natsx/natstest"
)

func TestNATS_ConnectFailsFastWhenUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + l.Addr().String()
	l.Close()
	start := time.Now()
	_, err = natsx.Connect(context.Background(), url, natsx.Options{ConnectTimeout: 2 * time.Second})
	if !errors.Is(err, natsx.ErrUnreachable) {
		t.Fatalf("err %v, want ErrUnreachable", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v", d)
	}
}

func TestNATS_UpFollowsTheServer(t *testing.T) {
	s := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := natsx.Connect(ctx, s.URL(), natsx.Options{ReconnectWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Up() {
		t.Fatal("not up after Connect")
	}
	s.Stop()
	for {
		up, since, changed := c.Status()
		if !up {
			if since.IsZero() {
				t.Fatal("down without a time")
			}
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("never saw the link go down")
		}
	}
	s.Restart()
	if err := c.WaitUp(ctx); err != nil {
		t.Fatalf("never came back: %v", err)
	}
	if _, err := c.JS.AccountInfo(ctx); err != nil {
		t.Fatalf("JetStream after the restart: %v", err)
	}
}
