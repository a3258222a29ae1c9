package mirror

// BufferCounts returns the number of reassembly buffers that a's flow
// directions hold and the number kept free for reuse.
func BufferCounts(a *Assembler) (held, free int) {
	return a.nBufs - len(a.free), len(a.free)
}
