package mirror

// buffer is a flow direction's reassembly buffer: the bytes it holds out of
// order (and, with Config.History, the last bytes it delivered) and the runs
// they form. Byte at stream offset o lives at ring[o%len(ring)]; held runs
// occupy offsets in [next, next+len(ring)), the rest keeps delivered history.
//
// A direction takes a buffer when it first has to hold bytes (or, with
// History, when it starts) and gives it back when it holds nothing more
// (without History) or ends. At most Config.MaxBufferTotal/BufferPerFlow
// buffers exist, free ones included; a bounded free list keeps some for
// reuse, so steady-state processing allocates nothing.
type buffer struct {
	ring []byte
	runs [maxRuns]run
}

// reclaimScan bounds the walk from the oldest buffer holder looking for a
// buffer to take back when all of them are in use.
const reclaimScan = 16

// takeBuffer gives f a buffer if it has none. When all MaxBufferTotal
// allows are in use, it takes one back from another direction among the
// reclaimScan that have held theirs longest: one that holds only history
// (nothing is lost), or else, when hold is set, the least recently active of
// them, whose holes are then skipped (Stats.BufferTotalSkips) and its held
// bytes delivered, as a full per-flow buffer does. Without hold (a buffer
// for History alone) it never skips a hole and reports whether f got a
// buffer; with hold it always does.
func (a *Assembler) takeBuffer(f *flow, hold bool, ts int64) bool {
	if f.buf != nil {
		return true
	}
	if len(a.free) == 0 && (a.nBufs >= a.maxBufs || !a.budget.takeBuffer(a.bufSize)) {
		if !a.reclaim(hold, ts) {
			return false
		}
	}
	if n := len(a.free); n > 0 {
		f.buf = a.free[n-1]
		a.free[n-1] = nil
		a.free = a.free[:n-1]
	} else {
		f.buf = &buffer{ring: make([]byte, a.bufSize)}
		a.nBufs++ // the Budget's share was taken above
	}
	// Whatever the ring holds belongs to its previous user.
	f.histStart = max(f.histStart, f.next)
	f.bufPrev, f.bufNext = a.bufTail, -1
	if a.bufTail >= 0 {
		a.t.flows[a.bufTail].bufNext = f.idx
	} else {
		a.bufHead = f.idx
	}
	a.bufTail = f.idx
	return true
}

// reclaim frees one buffer held by another direction (see takeBuffer).
func (a *Assembler) reclaim(hold bool, ts int64) bool {
	victim := int32(-1)
	for i, fi := 0, a.bufHead; i < reclaimScan && fi >= 0; i, fi = i+1, a.t.flows[fi].bufNext {
		v := &a.t.flows[fi]
		if v.nRuns == 0 {
			victim = fi
			break
		}
		if hold && (victim < 0 || v.lastSeen < a.t.flows[victim].lastSeen) {
			victim = fi
		}
	}
	if victim < 0 {
		return false
	}
	v := &a.t.flows[victim]
	for v.nRuns > 0 {
		a.skipHole(v, &a.stats.BufferTotalSkips, ts)
	}
	if v.finSeen && v.next >= v.finOff {
		a.end(v, EndFIN, ts) // as its own segment would have
	}
	a.releaseBuffer(v)
	return true
}

// releaseBuffer takes f's buffer, if any, back to the free list, or drops
// it when the free list is full.
func (a *Assembler) releaseBuffer(f *flow) {
	b := f.buf
	if b == nil {
		return
	}
	f.buf = nil
	f.histStart = f.next
	if f.bufPrev >= 0 {
		a.t.flows[f.bufPrev].bufNext = f.bufNext
	} else {
		a.bufHead = f.bufNext
	}
	if f.bufNext >= 0 {
		a.t.flows[f.bufNext].bufPrev = f.bufPrev
	} else {
		a.bufTail = f.bufPrev
	}
	f.bufPrev, f.bufNext = -1, -1
	if len(a.free) < a.maxFree {
		a.free = append(a.free, b)
		return
	}
	a.nBufs--
	a.budget.releaseBuffers(1, a.bufSize)
}
