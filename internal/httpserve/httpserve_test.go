package httpserve

import (
	"context"
	"io"
	"net/http"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServeAndShutdown(t *testing.T) {
	s, err := Listen("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://" + s.Addr.String())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok" {
		t.Fatalf("body %q", body)
	}
	c.CloseIdleConnections()
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Wait(); err != nil {
		t.Fatalf("Wait after Shutdown: %v", err)
	}
	again, err := Listen(s.Addr.String(), http.NotFoundHandler(), nil)
	if err != nil {
		t.Fatalf("the address is still taken after Shutdown: %v", err)
	}
	again.Shutdown(context.Background())
}
