// Package replica makes a contextvm.Server one replica of a group that
// serves the same key through NATS JetStream (docs/replicas.md): a Group,
// given as ServerOptions.Replicas, is the server's Coordinator.
//
// Every replica receives every message event. The one that owns the
// client's session (the owner in the group's session record while it
// lives, else the rendezvous choice among the live members) records the
// calls it carries as in flight, claims it in the shared bucket and runs
// it; the others pass it by, and remember it for a while in case its
// owner dies before claiming it. A replica that cannot coordinate (its
// link to NATS down or just back, the bucket failing) holds what it owns,
// neither running nor refusing it, until it can. When a member dies, the
// survivors take over its clients (their sessions rebuilt from the
// group's record), answer its calls in flight with CodeReplicaLost, and
// run what it never claimed. One replica at a time holds the announcer
// lease and publishes the server's announcements.
//
// Files: group.go (membership over NATS heartbeats, placement, the
// session and in-flight records in the bucket, the announcer lease, the
// status for /healthz and /metrics; Store, the bucket for what the
// server's owner keeps there, such as payment channels), route.go (what the server's router
// hands the group: a message to route, a reassembled transfer, a session
// to start or record, an answer that went out; and the takeover of a
// lost member), hold.go (what a replica that cannot coordinate does with
// its requests).
package replica
