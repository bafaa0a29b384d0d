// Package natstest runs an embedded NATS server with JetStream for tests
// and benchmarks. It stores to disk with sync always, so that a message
// JetStream acknowledged has been written with fsync, as the durability
// tests need. Production uses a real nats-server, never this. A Proxy
// in front of it cuts one client off while the others keep their links.
//
// Files: natstest.go (the Server: start, stop and restart on the same port
// and store), proxy.go (the Proxy).
package natstest
