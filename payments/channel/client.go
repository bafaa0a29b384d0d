package channel

import (
	"fmt"
	"sync"
)

// Client is a client's side of one channel: the state it makes receipts
// from. It advances on every receipt it makes (a receipt sent is assumed
// accepted) and takes the server's state whenever an answer or a refusal
// carries it, so that a receipt lost on the way costs one refusal, never a
// double payment. Safe for concurrent use; calls on one channel that run
// at once may be told to resend.
type Client struct {
	mu sync.Mutex
	s  State
}

// NewClient returns the client of a channel in state s (Books.Open's, or
// StateOf a server's payload).
func NewClient(s State) *Client { return &Client{s: s} }

// Pay returns the receipt that pays price msat, and counts it as spent.
// It fails with ErrInsufficientFunds when the deposit does not cover it
// (top up), or ErrClosed.
func (c *Client) Pay(price uint64) (SubRAV, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, err := c.s.Next(price)
	if err != nil {
		return SubRAV{}, err
	}
	c.s.Nonce, c.s.Accumulated = r.Nonce, r.AccumulatedAmount
	return r, nil
}

// Resync takes s, the server's state of the channel (StateOf its payload),
// as the client's: the server's books are the truth.
func (c *Client) Resync(s State) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.Channel != c.s.Channel {
		return fmt.Errorf("channel: state of channel %s offered to channel %s", s.Channel, c.s.Channel)
	}
	opened, last := c.s.Opened, c.s.LastUse
	c.s = s
	c.s.Opened, c.s.LastUse = opened, last
	return nil
}

// State returns the client's state of the channel.
func (c *Client) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s
}
