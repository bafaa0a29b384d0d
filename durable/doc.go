// Package durable keeps the small records that must survive a crash of the
// process that wrote them: the ids of requests already executed (so that a
// replay never runs twice, restarts included), and later the charges,
// budgets and nonces of payments and signed requests. Each is written
// before the action it guards.
//
// A Store is a set of spaces (one per kind of record), each a map from key
// to value with an expiry: a record lives until its expiry, since after it
// the action it guards can no longer happen (a replayed event is stale by
// then). Claim writes a key only if it is new: that is the guard. A
// Swapper also changes a record only if it still holds what the caller
// read (Swap): the read-modify-write of a record that several processes
// change, such as a payment channel's in a replica group.
//
// Two implementations: Open keeps the records in a directory, and Memory
// keeps them in the process (cvm demo, tests). A third, on NATS JetStream
// key-value buckets, can serve several processes at once.
//
// # Durability of Open
//
// Every write is appended to a journal with one write(2) before the call
// returns: from then on it survives a crash of the process (kill -9), since
// the operating system holds it. The journal is fsynced at most every
// SyncInterval (one second by default), not per call: a power loss can lose
// the records of the last interval, never more, and never corrupts what
// came before (each journal record carries a checksum, and a torn tail is
// cut off when the store is opened). Periodically the journal is folded
// into a bbolt file (an ordinary transaction, fsynced) and only then
// deleted.
//
// One process at a time: a second Open of the same store fails at once with
// ErrLocked instead of waiting on the lock.
//
// Files: store.go (the Store and Swapper interfaces and the Options), memory.go (the
// in-memory table, which is both the Memory store and a file store's index),
// journal.go (the journal's record format, checksums and torn-tail
// recovery), file.go (Open: the lock, the journal, and the folding into
// bbolt).
package durable
