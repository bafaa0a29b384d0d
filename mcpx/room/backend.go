package room

import (
	"context"
	"errors"

	"github.com/cvmgo/cvm/mcpx"
)

// Errors a Backend returns, matched with errors.Is; the gateway answers
// each in its own words.
var (
	// ErrUnavailable: the backend cannot be reached now (a cluster node
	// that lost its link to NATS); the gateway answers unavailable, with
	// the backend's RetryAfter.
	ErrUnavailable = errors.New("mcpx: backend unavailable")
	// ErrTopicFull: the topic has Options.MaxParticipants participants.
	ErrTopicFull = errors.New("topic full")
	// ErrRosterFull: the topic's roster would not fit in one message of
	// the backend (a cluster's NATS message size limit).
	ErrRosterFull = errors.New("the topic's roster has reached the NATS message size limit")
	// ErrNotStored: the envelope was delivered but could not be stored.
	ErrNotStored = errors.New("delivered but not stored")
)

// Backend is what the gateway's topics keep beyond one connection: who is
// in each topic (Roster), the order, storage and delivery of its
// envelopes (Log), presence (Broker) and history. The gateway joins,
// leaves and publishes once, over it. With Options.Backend nil a gateway
// keeps all of it in the process, over Options.History; package
// mcpx/room/roomnats is a Backend on NATS JetStream that several gateway
// nodes share.
type Backend interface {
	Roster
	Log
	// Broker carries presence (joins, leaves, heartbeats), which is not
	// stored: to every node serving the topic.
	Broker
	// History is what reads the log back (nil: history is disabled).
	History() HistoryReader
	// Node names this gateway node among those sharing the backend (""
	// for a backend of one process). Entries whose Node is this name
	// are this node's own appends.
	Node() string
	// Up reports whether the backend can be reached: while it cannot,
	// publishing is refused with ErrUnavailable and /healthz says so.
	Up() bool
}

// Member is one participant's entry in a topic's roster: the node and the
// connection (a name the gateway gives each) that hold it.
type Member struct {
	Node string           `json:"node"`
	Conn string           `json:"conn"`
	P    mcpx.Participant `json:"p"`
}

// Roster decides who is in each topic. A participant has one connection;
// the newer replaces the older, on whichever node.
type Roster interface {
	// Claim makes conn participant p's connection in topic, before the
	// WebSocket upgrade, and returns the entry it replaced (an older
	// connection of p), if any. It fails with ErrTopicFull when max other
	// participants hold the topic.
	Claim(ctx context.Context, topic string, p mcpx.Participant, conn string, max int) (replaced *Member, err error)
	// Release removes participant id's entry if conn still holds it, and
	// tells nobody: the connection never joined.
	Release(ctx context.Context, topic, id, conn string) error
	// Leave removes participant p's entry if conn still holds it and
	// publishes p's leave (why). With mcpx.LeaveShutdown the gateway is
	// stopping, not the participant leaving: the backend decides when
	// the entry goes.
	Leave(ctx context.Context, topic string, p mcpx.Participant, conn string, why mcpx.LeaveReason)
	// Members is topic's roster (never nil; the caller must not modify it).
	Members(topic string) map[string]Member
}

// Log orders a topic's envelopes, gives each its seq, stores them and
// hands them, in order, to every node's Follower.
type Log interface {
	// Follow hands f, in order, every entry of topic appended after the
	// call (on whichever node) and what happens to the roster and the
	// link, until stop is called. It returns the topic's last seq before
	// the first entry f gets.
	Follow(ctx context.Context, topic string, f Follower) (last uint64, stop func(), err error)
	// Append queues a for topic's log. It may wait, until ctx ends, for
	// room in what waits to be stored (backpressure on the publisher);
	// it calls a.Done exactly once, maybe before it returns.
	Append(ctx context.Context, topic string, a *Append)
}

// Follower is a topic of this node, told by the Log what happens to it.
// None of its methods blocks.
type Follower interface {
	// Deliver queues an entry of the log for this node's participants.
	Deliver(Entry)
	// RosterChanged gets the topic's roster as another node wrote it.
	RosterChanged(members map[string]Member)
	// LinkLost runs each time the backend becomes unreachable.
	LinkLost()
}

// Append is one envelope on its way into a topic's log.
type Append struct {
	// Delivery says who receives it (To, Except); Frame is Encode's.
	Delivery
	ID, From string
	// Recipients are the envelope's own (its to), which history keeps;
	// Delivery.To is nil when every participant sees directed traffic.
	Recipients []string
	// Pub is this node's number for the append: the Entry carries it
	// back, so that the node knows its own envelopes.
	Pub uint64
	// Encode builds the frame for a seq; it may be called again, with
	// another seq, if another node took the first.
	Encode func(seq uint64) []byte
	// Done gets the envelope's seq once it is stored, or why not. It
	// must not block.
	Done func(seq uint64, err error)
	// Placed is called once the envelope has its place in the log's
	// order, or failed to get one: at the latest after Done. The leave of
	// a connection waits for its envelopes' places, so that it comes
	// after them, but not for their storage.
	Placed func()
}

// Entry is one stored envelope as every node's Follower sees it.
type Entry struct {
	Delivery
	Seq  uint64
	From string
	Node string // the node that appended it
	Pub  uint64 // that node's number for the append
}
