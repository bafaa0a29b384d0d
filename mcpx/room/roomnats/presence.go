package roomnats

import (
	"context"
	"fmt"
	"strings"

	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/nats-io/nats.go"
)

// Publish implements Broker for what is not stored: presence, on core NATS.
// It queues the message for the writer (drainPresence) and never blocks:
// when the queue is full the message is shed, counted
// (cvm_mcpx_cluster_presence_shed_total{direction="out"}) and logged.
// Presence is advisory (the roster is the bucket's), so a node whose link
// to NATS cannot keep up loses heartbeats and presence events rather than
// holding up the topics that publish them.
func (c *Cluster) Publish(_ context.Context, d room.Delivery) error {
	if !c.Up() {
		return room.ErrUnavailable
	}
	m := nats.NewMsg(presencePrefix + topicToken(d.Topic))
	m.Data = d.Frame
	if d.To != nil {
		m.Header.Set(hdrTo, strings.Join(d.To, ","))
	}
	if d.Except != "" {
		m.Header.Set(hdrExcept, d.Except)
	}
	select {
	case c.presOut <- m:
	default:
		c.stats.presenceShedOut.Add(1)
	}
	return nil
}

// drainPresence writes the queued presence to NATS, in order, until ctx
// ends; then it writes what is still queued (leaves published just before
// Close, say) and returns.
func (c *Cluster) drainPresence(ctx context.Context) {
	write := func(m *nats.Msg) {
		if err := c.pubPresence(m); err != nil {
			// NATS went down after the message was queued: nothing
			// buffers it (natsx never buffers while reconnecting).
			c.stats.presenceShedOut.Add(1)
		}
	}
	for {
		select {
		case m := <-c.presOut:
			write(m)
		case <-ctx.Done():
			for {
				select {
				case m := <-c.presOut:
					write(m)
				default:
					return
				}
			}
		}
	}
}

// Subscribe implements Broker for presence. The subscription's queue is
// bounded (PresencePending); what the client drops past it is counted
// (cvm_mcpx_cluster_presence_shed_total{direction="in"}) and logged.
func (c *Cluster) Subscribe(topic string, deliver func(room.Delivery)) (func(), error) {
	sub, err := c.conn.NC.Subscribe(presencePrefix+topicToken(topic), func(m *nats.Msg) {
		deliver(deliveryFromHeaders(topic, m.Header, m.Data))
	})
	if err != nil {
		return nil, fmt.Errorf("mcpx cluster: %w", err)
	}
	if err := sub.SetPendingLimits(c.opts.PresencePending, 8<<20); err != nil {
		sub.Unsubscribe()
		return nil, fmt.Errorf("mcpx cluster: %w", err)
	}
	c.mu.Lock()
	c.presSubs[sub] = 0
	c.mu.Unlock()
	return func() {
		n, _ := sub.Dropped()
		sub.Unsubscribe()
		c.mu.Lock()
		c.presDropped += uint64(n)
		logged := c.presSubs[sub]
		delete(c.presSubs, sub)
		c.mu.Unlock()
		if n > logged {
			c.log.Warn("presence shed: this node did not keep up with NATS", "direction", "in", "topic", topic, "dropped", n-logged)
		}
	}, nil
}

// presenceShedIn counts the presence messages the client dropped because
// a topic did not take them in time (the subscriptions' pending limits).
func (c *Cluster) presenceShedIn() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.presDropped
	for sub := range c.presSubs {
		d, _ := sub.Dropped()
		n += uint64(d)
	}
	return n
}

// logShed writes one log line for the presence shed since the last one,
// in each direction (called every NodeTimeout/5).
func (c *Cluster) logShed() {
	if out := c.stats.presenceShedOut.Load(); out > c.shedLogged {
		c.log.Warn("presence shed: the queue towards NATS was full", "direction", "out", "dropped", out-c.shedLogged, "queue", c.opts.PresenceQueue)
		c.shedLogged = out
	}
	type drop struct {
		sub *nats.Subscription
		n   int
	}
	var drops []drop
	c.mu.Lock()
	for sub, logged := range c.presSubs {
		if d, _ := sub.Dropped(); d > logged {
			drops = append(drops, drop{sub, d - logged})
			c.presSubs[sub] = d
		}
	}
	c.mu.Unlock()
	for _, d := range drops {
		c.log.Warn("presence shed: this node did not keep up with NATS", "direction", "in", "subject", d.sub.Subject, "dropped", d.n, "pending_max", c.opts.PresencePending)
	}
}

func deliveryFromHeaders(topic string, h nats.Header, frame []byte) room.Delivery {
	d := room.Delivery{Topic: topic, Frame: frame, Except: h.Get(hdrExcept)}
	if to := h.Get(hdrTo); to != "" {
		d.To = strings.Split(to, ",")
	}
	return d
}
