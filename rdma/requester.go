package rdma

import "time"

// requesterLocked handles a response: an ACK or NAK, or a READ response
// (IBTA Vol. 1, 9.7.5.2).
//
// +checklocks:q.mu
func (q *QP) requesterLocked(p *Packet) {
	psn := p.BTH.PSN()
	if psnDiff(psn, q.unacked) < 0 || psnDiff(psn, q.sentPSN) >= 0 {
		q.d.st.StaleResponses.Add(1) // old, or for nothing sent
		return
	}
	if p.BTH.Opcode() != OpAcknowledge {
		q.readResponseLocked(p)
		return
	}
	syn := p.AETH.Syndrome()
	switch syn & 0x60 {
	case SyndromeACK:
		q.d.st.AcksReceived.Add(1)
		q.ackThroughLocked(psn)
	case SyndromeRNRNAK:
		q.d.st.RNRNAKsReceived.Add(1)
		q.ackThroughLocked((psn - 1) & PSNMask)
		if q.a.RNRRetry != 7 {
			if q.rnrRetries >= q.a.RNRRetry {
				q.wqeAtLocked(psn).status = StatusRNRRetryExceeded
				q.d.st.RetryExceeded.Add(1)
				q.toErrorLocked()
				return
			}
			q.rnrRetries++
		}
		q.rewindLocked(psn)
		q.rnrWait = true
		q.rnrTimer.Reset(RNRDelay(syn & 0x1f))
	case SyndromeNAK:
		switch code := syn & 0x1f; code {
		case NAKSequenceError:
			q.d.st.SeqNAKsReceived.Add(1)
			q.ackThroughLocked((psn - 1) & PSNMask)
			q.rewindOnceLocked(psn)
		default:
			q.d.st.ErrorNAKsReceived.Add(1)
			q.ackThroughLocked((psn - 1) & PSNMask)
			st := StatusRemoteOp
			switch code {
			case NAKInvalidRequest:
				st = StatusRemoteInvalid
			case NAKRemoteAccessError:
				st = StatusRemoteAccess
			}
			if w := q.wqeAtLocked(psn); w != nil {
				w.status = st
			}
			q.toErrorLocked()
		}
	default:
		q.d.st.Malformed.Add(1) // reserved syndrome
	}
}

// wqeAtLocked returns the outstanding request whose PSNs include psn, or
// nil.
//
// +checklocks:q.mu
func (q *QP) wqeAtLocked(psn uint32) *swqe {
	for i := q.sqHead; i != q.sqTail; i++ {
		w := q.wqe(i)
		if d := psnDiff(psn, w.psn); d >= 0 && d < int32(w.npkts) {
			return w
		}
	}
	return nil
}

// ackThroughLocked takes PSNs up to and including a as acknowledged,
// completes the requests that are done, in order, and reports progress.
// An acknowledgement past a READ whose responses have not all come means
// they were lost: the READ is sent again from the first missing one.
//
// +checklocks:q.mu
func (q *QP) ackThroughLocked(a uint32) bool {
	if psnDiff(a, q.unacked) < 0 {
		return false
	}
	old := q.unacked
	for i := q.sqHead; i != q.sqTail; i++ {
		w := q.wqe(i)
		if psnDiff(a, w.psn) < 0 {
			break
		}
		if w.wr.Op == OpRead && !w.acked {
			missing := (w.psn + uint32(w.readGot/q.a.PathMTU)) & PSNMask
			if psnDiff(a, missing) >= 0 {
				q.setUnackedLocked(missing)
				q.rewindOnceLocked(missing)
			} else {
				q.setUnackedLocked((a + 1) & PSNMask)
			}
			break
		}
		last := (w.psn + w.npkts - 1) & PSNMask
		if psnDiff(a, last) < 0 {
			q.setUnackedLocked((a + 1) & PSNMask)
			break
		}
		w.acked = true
		q.setUnackedLocked((last + 1) & PSNMask)
	}
	q.retireLocked()
	return q.unacked != old
}

// setUnackedLocked moves the oldest unacknowledged PSN forward to p: the
// connection made progress, so the retry counters start again.
//
// +checklocks:q.mu
func (q *QP) setUnackedLocked(p uint32) {
	if psnDiff(p, q.unacked) > 0 {
		q.unacked = p
		q.progress = true
		q.retries = 0
		q.rnrRetries = 0
		q.rewound = false
	}
}

// retireLocked completes finished requests from the head of the queue, in
// order.
//
// +checklocks:q.mu
func (q *QP) retireLocked() {
	for q.sqHead != q.sqTail {
		w := q.wqe(q.sqHead)
		if !w.acked {
			break
		}
		n := len(w.buf)
		if w.readOut {
			q.readsOut--
		}
		q.freeSlotLocked(w)
		q.sendCQ.push(Completion{ID: w.wr.ID, QPN: q.qpn, Op: w.wr.Op, Bytes: n})
		*w = swqe{}
		q.sqHead++
	}
	if q.sqNext < q.sqHead {
		q.sqNext, q.sqPkt = q.sqHead, 0
	}
}

// freeSlotLocked returns w's sealed-message slot.
//
// +checklocks:q.mu
func (q *QP) freeSlotLocked(w *swqe) {
	if q.hk.h != nil && w.wire != nil && w.wr.Op != OpRead {
		q.hk.free = append(q.hk.free, w.wire[:0])
	}
}

// readResponseLocked lands a READ response in the local buffer.
//
// +checklocks:q.mu
func (q *QP) readResponseLocked(p *Packet) {
	psn := p.BTH.PSN()
	var w *swqe
	for i := q.sqHead; i != q.sqTail; i++ {
		x := q.wqe(i)
		if d := psnDiff(psn, x.psn); d >= 0 && d < int32(x.npkts) {
			w = x
			break
		}
		if x.wr.Op == OpRead && !x.acked {
			break // responses to an earlier READ are missing
		}
	}
	if w == nil || w.wr.Op != OpRead || w.acked {
		q.d.st.StaleResponses.Add(1)
		return
	}
	mtu := q.a.PathMTU
	k := uint32(w.readGot / mtu)
	want := (w.psn + k) & PSNMask
	if psn != want {
		q.d.st.StaleResponses.Add(1)
		if psnDiff(psn, want) > 0 { // a response lost: ask again from it
			q.setUnackedLocked(want)
			q.rewindOnceLocked(want)
		}
		return
	}
	op := p.BTH.Opcode()
	last := k == w.npkts-1
	n := len(p.Payload)
	// A READ sent again for its rest (reqStart > 0) is a new request to
	// the responder: its responses start with FIRST or ONLY again.
	var okOp bool
	switch op {
	case OpReadResponseOnly:
		okOp = last && (k == 0 || k == w.reqStart)
	case OpReadResponseFirst:
		okOp = !last && (k == 0 || k == w.reqStart)
	case OpReadResponseLast:
		okOp = last && k != 0
	case OpReadResponseMid:
		okOp = !last && k != 0
	}
	if !okOp || (!last && n != mtu) || (last && n != len(w.buf)-w.readGot) {
		q.d.st.Malformed.Add(1)
		return
	}
	w.readGot += copy(w.buf[w.readGot:], p.Payload)
	if last {
		w.acked = true // all of it: an ACK of its last PSN completes it
	}
	q.ackThroughLocked(psn)
}

// rewindLocked makes psn the next PSN to send: go-back-N.
//
// +checklocks:q.mu
func (q *QP) rewindLocked(psn uint32) {
	for i := q.sqHead; i != q.sqTail; i++ {
		w := q.wqe(i)
		if d := psnDiff(psn, w.psn); d >= 0 && d < int32(w.npkts) {
			q.sqNext, q.sqPkt = i, uint32(d)
			q.rewound, q.rewoundAt = true, psn
			return
		}
	}
}

// rewindOnceLocked rewinds to psn unless the last rewind went there and
// nothing was acknowledged since: repeated NAKs for one gap (a reordered
// or duplicated NAK) cost one resend.
//
// +checklocks:q.mu
func (q *QP) rewindOnceLocked(psn uint32) {
	if q.rewound && q.rewoundAt == psn {
		return
	}
	q.rewindLocked(psn)
}

// onTimeout is the retransmission timer: without progress for a whole
// Timeout, the requester resends from the oldest unacknowledged PSN, at
// most RetryCount times in a row.
func (q *QP) onTimeout() {
	q.mu.Lock()
	if q.state != StateRTS && q.state != StateSQD || psnDiff(q.sentPSN, q.unacked) <= 0 {
		q.timerArmed = false
		q.mu.Unlock()
		return
	}
	// A pump still writing (over link/pipe, a write can carry the peer's
	// whole answer before it returns, the answers waiting in the socket's
	// queue meanwhile) has not had its chance: no retry is spent on it.
	if q.progress || q.rnrWait || q.pumping {
		q.progress = false
		q.timer.Reset(q.a.Timeout)
		q.mu.Unlock()
		return
	}
	if q.retries >= q.a.RetryCount {
		if w := q.wqeAtLocked(q.unacked); w != nil {
			w.status = StatusRetryExceeded
		}
		q.d.st.RetryExceeded.Add(1)
		q.toErrorLocked()
		q.mu.Unlock()
		return
	}
	q.retries++
	q.d.st.Timeouts.Add(1)
	q.rewindLocked(q.unacked)
	q.timer.Reset(q.a.Timeout)
	q.mu.Unlock()
	q.pump()
}

// onRNRTimer ends an RNR wait: the request is sent again.
func (q *QP) onRNRTimer() {
	q.mu.Lock()
	q.rnrWait = false
	q.mu.Unlock()
	q.pump()
}

// rnrDelays is the RNR NAK timer field's table (IBTA Vol. 1, 9.7.5.2.8,
// table 45), in microseconds.
var rnrDelays = [32]int64{655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520}

// RNRDelay returns how long a requester waits after an RNR NAK with timer
// code c (the low five bits are used).
func RNRDelay(c uint8) time.Duration { return time.Duration(rnrDelays[c&31]) * time.Microsecond }
