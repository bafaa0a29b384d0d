package room

import (
	"context"
	"sync"
)

// Delivery is one envelope on its way to a topic's participants: the bytes
// every recipient gets, encoded once, and who the recipients are.
type Delivery struct {
	Topic string
	// Frame is the encoded envelope. It is shared by every recipient and
	// must never be modified.
	Frame []byte
	// To lists the recipients; nil means every participant of the topic.
	To []string
	// Except is a participant that must not receive it ("" for none): the
	// joiner of its own join, or the sender of a directed envelope when
	// every participant sees directed traffic.
	Except string
}

// Broker carries what is not stored (presence) to every gateway node
// serving a topic: each hands it to its own local participants. A Backend
// is one; LocalBroker serves a single process.
//
// A Broker must deliver a topic's envelopes to each subscriber in the order
// they were published. Publish and Subscribe may be called concurrently.
type Broker interface {
	// Publish hands d to every subscriber of d.Topic.
	Publish(ctx context.Context, d Delivery) error
	// Subscribe calls deliver for every later delivery to topic until
	// unsubscribe is called. deliver must not block: it only queues.
	Subscribe(topic string, deliver func(Delivery)) (unsubscribe func(), err error)
}

// LocalBroker is the in-process Broker: Publish calls each subscriber
// synchronously, in the publisher's goroutine. Safe for concurrent use.
type LocalBroker struct {
	mu     sync.RWMutex
	subs   map[string][]*localSub
	closed bool
}

type localSub struct{ deliver func(Delivery) }

// NewLocalBroker returns an empty in-process broker.
func NewLocalBroker() *LocalBroker {
	return &LocalBroker{subs: map[string][]*localSub{}}
}

// Publish implements Broker.
func (b *LocalBroker) Publish(_ context.Context, d Delivery) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return ErrClosed
	}
	for _, s := range b.subs[d.Topic] {
		s.deliver(d)
	}
	return nil
}

// Subscribe implements Broker.
func (b *LocalBroker) Subscribe(topic string, deliver func(Delivery)) (func(), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	s := &localSub{deliver: deliver}
	b.subs[topic] = append(b.subs[topic], s)
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		subs := b.subs[topic]
		for i, x := range subs {
			if x == s {
				b.subs[topic] = append(subs[:i:i], subs[i+1:]...)
				break
			}
		}
		if len(b.subs[topic]) == 0 {
			delete(b.subs, topic)
		}
	}, nil
}

// Close makes later calls fail with ErrClosed.
func (b *LocalBroker) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.subs = map[string][]*localSub{}
	return nil
}
