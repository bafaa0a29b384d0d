// Command mcpxload measures an MCPx gateway from a separate process.
//
// It starts "cvm room serve" as a child process, connects N participants to
// one topic and measures, in the same run:
//
//   - fan-out: one participant broadcasts with a bounded window of
//     envelopes in flight; deliveries per second to all N participants,
//     the delivery latency (send to receipt, p50/p99), and the gateway's
//     CPU time per delivery (utime+stime of the gateway process from
//     /proc, divided by the deliveries);
//   - directed round trips: a request to one participant, which answers at
//     once; p50/p99 of the round trip.
//
// Beside each figure it measures a baseline on the same machine in the same
// run: a minimal WebSocket hub (this program re-executed with -raw-hub: the
// same websocket library, no validation, no history) under the same load,
// a raw WebSocket echo round trip through it, and the cost of encoding an
// envelope with encoding/json. It prints the figures and their ratios.
//
//	go run ./bench/mcpxload -cvm bin/cvm
//
// With -cluster it measures instead, in one run, the same fan-out and
// directed round trips against 1 node without NATS, 1 node with NATS and 3
// nodes with NATS ("cvm room serve --nats", participants spread over the
// nodes), with an embedded nats-server with JetStream in a child process
// (this program re-executed with -nats-server), and prints each
// configuration's CPU per delivery (gateways and nats-server) as a ratio to
// the node without NATS: the coordination overhead.
//
//	go run ./bench/mcpxload -cvm bin/cvm -cluster   # or: make bench-mcpx CLUSTER=1
//
// Files: main.go (flags, the child processes, the single-node figures),
// swarm.go (N participants on raw WebSocket connections, and the fan-out and
// directed measurements they make), rawhub.go (the baseline hub and its echo
// round trip), cluster.go (-cluster: the three configurations, the
// nats-server child and their CPU). The same swarm measures the gateway and
// the baseline, so that the ratios compare servers, not clients.
package main
