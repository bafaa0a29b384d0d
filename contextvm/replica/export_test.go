package replica

// RemoveRecordsInline makes a replica remove the in-flight record of each
// answered call on the answering goroutine, as it did before removals were
// queued: the baseline of BenchmarkReplicas.
func RemoveRecordsInline(g *Group) { g.syncRemoval.Store(true) }
