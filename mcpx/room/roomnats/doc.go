// Package roomnats is a room.Backend on NATS JetStream: several gateway
// nodes given Clusters on one NATS serve the same topics, with one order,
// one history and one roster (cvm room serve --nats; docs/mcpx.md,
// "Several nodes"). Give a Cluster to room.Options.Backend.
//
// How the files fit:
//
//   - cluster.go: the NATS names (the MCPX stream, the mcpx-roster bucket,
//     subjects, headers), ClusterOptions, and NewCluster, which creates
//     them and starts the node's goroutines; Close stops them.
//   - backend.go: the room.Backend methods, over the rest.
//   - appender.go: the log's group commit. One appender per topic and node
//     puts what queued during an append into the next JetStream message,
//     guarded by Nats-Expected-Last-Subject-Sequence; batch.go is the
//     format of a message holding several envelopes.
//   - follow.go: every node follows each of its topics with an ordered
//     consumer and hands the entries to the gateway, in log order.
//   - roster.go: each topic's roster, one key of the bucket, cached from
//     its watcher: claims, releases, leaves (retried while NATS is down);
//     rostercommit.go writes a topic's changes in groups, by
//     compare-and-set.
//   - presence.go: presence over core NATS, through bounded queues that
//     shed rather than block.
//   - failover.go: node heartbeats, the sweep of dead nodes' participants,
//     the participants of a stopped gateway (orphans), and telling the
//     topics when the link to NATS goes down.
//   - history.go: room.HistoryReader over the stream (pages by seq, time
//     and id, with binary searches over stream sequences); trim.go purges
//     by age, on one node.
//   - metrics.go: the cluster's figures, served in each gateway's /metrics.
//
// Concurrency: a Cluster is safe for concurrent use. Its goroutines (the
// watcher, the heartbeat, the presence writer, the link watcher, the
// trimmer, and the per-topic appenders and roster writers while they have
// work) belong to it and end with Close.
package roomnats
