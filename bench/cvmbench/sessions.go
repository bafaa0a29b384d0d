package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/nostrx"
)

// errNotMeasured marks a figure the benchmark could not take: it is
// reported as such, never as a number.
var errNotMeasured = errors.New("not measured")

// idleSessionOptions are the server's options for n idle sessions: every
// one of them is an initialize from a key of its own, made up by the
// benchmark and sent at once, which is what the admission limits are there
// to refuse (CodeServerBusy) on a server in service. Here they are opened
// up so that the server keeps every session it is asked for.
func idleSessionOptions(relayURL string, n int) contextvm.ServerOptions {
	return contextvm.ServerOptions{
		Signer: contextvm.NewKeySigner(nostr.Generate()), Relays: []string{relayURL},
		Encryption: contextvm.EncryptDisabled, IdleTimeout: -1,
		MaxSessions: n + 1, SessionRate: -1,
	}
}

// measureSessions opens n idle client sessions on a server with opts, each
// by an initialize from its own key, and returns the heap and stack the
// server holds per session. Unless every one of the n was opened, there is
// no figure: the error says how many were.
func measureSessions(ctx context.Context, n int, opts contextvm.ServerOptions) (float64, error) {
	srv, err := contextvm.NewServer(ctx, opts)
	if err != nil {
		return 0, err
	}
	defer srv.Close()
	go srv.Serve(ctx, echoServer())

	// A listener for every answer, so that none is unheard (and retried),
	// and so that the wait below ends when each initialize was answered:
	// with a session, or with a refusal.
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: opts.Relays})
	defer pool.Close()
	answers := pool.Subscribe(nostr.Filter{Kinds: []nostr.Kind{contextvm.KindMessage}, Authors: []nostr.PubKey{srv.PublicKey()}}, 4096)
	defer answers.Close()
	select {
	case <-answers.Ready():
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	var answered atomic.Int64
	go func() {
		for range answers.Events() {
			answered.Add(1)
		}
	}()
	events := make([]nostr.Event, n)
	for i := range events {
		events[i] = nostr.Event{Kind: contextvm.KindMessage, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"p", srv.PublicKey().Hex()}},
			Content: fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"idle","version":"0"}}}`, i)}
		events[i].Sign(nostr.Generate())
	}
	before := heapAndStacks()
	jobs := make(chan nostr.Event)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for evt := range jobs {
				pool.Publish(ctx, evt)
			}
		})
	}
	for _, evt := range events {
		jobs <- evt
	}
	close(jobs)
	wg.Wait()
	deadline := time.Now().Add(2 * time.Minute)
	for answered.Load() < int64(n) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	after := heapAndStacks()
	// The events are in both readings: only the sessions differ.
	runtime.KeepAlive(events)
	return perSession(before, after, srv.Sessions(), n)
}

// perSession is the memory each of opened sessions added between the
// readings before and after, when all asked were opened and the memory
// grew; otherwise an error that says why there is no figure.
func perSession(before, after uint64, opened, asked int) (float64, error) {
	if opened != asked {
		return 0, fmt.Errorf("%w: the server opened %d of the %d sessions asked for", errNotMeasured, opened, asked)
	}
	if after <= before {
		return 0, fmt.Errorf("%w: the heap and stacks went from %d to %d bytes while %d sessions opened", errNotMeasured, before, after, opened)
	}
	return float64(after-before) / float64(opened), nil
}

func heapAndStacks() uint64 {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc + m.StackInuse
}
