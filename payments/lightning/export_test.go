package lightning

// PreparedForTest is how many invoices p has made ahead and not handed
// out: a test waits on it, since the wallet has made an invoice a moment
// before the processor keeps it.
func PreparedForTest(p *Processor) int {
	p.prep.mu.Lock()
	defer p.prep.mu.Unlock()
	n := 0
	for _, invs := range p.prep.ready {
		n += len(invs)
	}
	return n
}
