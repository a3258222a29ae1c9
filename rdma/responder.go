package rdma

import "encoding/binary"

// respondLocked runs the responder's rules (IBTA Vol. 1, 9.7.4.1 and
// 9.7.5.1) on request p.
//
// +checklocks:q.mu
func (q *QP) respondLocked(p *Packet) {
	op := p.BTH.Opcode()
	f := opFlags[op]
	psn := p.BTH.PSN()
	switch d := psnDiff(psn, q.ePSN); {
	case d > 0: // a gap: NAK it once, drop what follows until it is filled
		q.d.st.OutOfSequence.Add(1)
		if !q.nakSent {
			q.nakSent = true
			q.d.st.SeqNAKsSent.Add(1)
			q.setAckLocked(SyndromeNAK|NAKSequenceError, q.ePSN)
		}
		return
	case d < 0: // a duplicate: acknowledge again, or answer a READ again
		q.d.st.Duplicates.Add(1)
		if op == OpReadRequest {
			q.readLocked(p, true)
			return
		}
		q.setAckLocked(syndromeACKNoCredits, (q.ePSN-1)&PSNMask)
		return
	}
	// In sequence. A message's packets come FIRST, MIDDLE..., LAST of one
	// operation; anything else is an invalid request.
	if (f&fFirst != 0) != (q.inMsg == 0) || q.inMsg != 0 && q.inMsg != f&(fWrite|fSend) {
		q.fatalNAKLocked(NAKInvalidRequest, psn)
		return
	}
	switch {
	case f&fRead != 0:
		if q.hk.h != nil { // READs are not transformed: refused both ends
			q.fatalNAKLocked(NAKInvalidRequest, psn)
			return
		}
		if !q.readLocked(p, false) {
			return
		}
		q.ePSN = (psn + uint32(npkts(int(p.RETH.DMALength()), q.a.PathMTU))) & PSNMask
		q.msn = (q.msn + 1) & PSNMask
		q.nakSent = false
		return
	case f&fWrite != 0:
		if f&fFirst != 0 {
			n := int64(p.RETH.DMALength())
			if q.hk.h != nil {
				// The DMA length counts the sealed message; memory gets
				// the message.
				n -= int64(q.hk.h.Overhead())
				if n < 0 || n > int64(q.hk.max) {
					q.fatalNAKLocked(NAKInvalidRequest, psn)
					return
				}
				q.hk.rxN, q.hk.rxPSN = 0, psn
			}
			buf, ok := q.d.mr(p.RETH.RKey()).span(p.RETH.VA(), uint32(n), AccessRemoteWrite)
			if !ok {
				q.fatalNAKLocked(NAKRemoteAccessError, psn)
				return
			}
			q.wbuf, q.wlen, q.wleft = buf, len(buf), int(p.RETH.DMALength())
		}
		if !q.lengthOKLocked(f, len(p.Payload), q.wleft) {
			q.fatalNAKLocked(NAKInvalidRequest, psn)
			return
		}
		if f&fImm != 0 && q.rqN == 0 {
			q.rnrNAKLocked(psn)
			return
		}
		q.inMsg = fWrite
		if q.hk.h == nil {
			copy(q.wbuf[q.wlen-q.wleft:], p.Payload)
		} else {
			q.hk.rxN += copy(q.hk.rx[q.hk.rxN:], p.Payload)
		}
		q.wleft -= len(p.Payload)
		if f&fLast != 0 {
			q.inMsg = 0
			if q.hk.h != nil {
				msg, ok := q.openLocked(psn)
				if !ok {
					return
				}
				copy(q.wbuf, msg)
			}
			if f&fImm != 0 {
				q.completeRecvLocked(OpRecvWriteImm, q.wlen, p.Imm)
			}
			q.msn = (q.msn + 1) & PSNMask
		}
	case f&fSend != 0:
		if f&fFirst != 0 {
			if q.rqN == 0 {
				q.rnrNAKLocked(psn)
				return
			}
			q.rOff = 0
			q.hk.rxN, q.hk.rxPSN = 0, psn
		}
		if !q.lengthOKLocked(f, len(p.Payload), q.a.PathMTU) {
			q.fatalNAKLocked(NAKInvalidRequest, psn)
			return
		}
		r := &q.rq[q.rqHead]
		if q.hk.h != nil {
			if len(p.Payload) > len(q.hk.rx)-q.hk.rxN {
				q.fatalNAKLocked(NAKInvalidRequest, psn)
				return
			}
			q.inMsg = fSend
			q.hk.rxN += copy(q.hk.rx[q.hk.rxN:], p.Payload)
			if f&fLast == 0 {
				break
			}
			msg, ok := q.openLocked(psn)
			if !ok {
				return
			}
			if len(msg) > len(r.buf) {
				r.wr.Length = -1 // completes with StatusLocalLength
				q.fatalNAKLocked(NAKInvalidRequest, psn)
				return
			}
			q.rOff = copy(r.buf, msg)
		} else {
			if len(p.Payload) > len(r.buf)-q.rOff {
				r.wr.Length = -1 // completes with StatusLocalLength
				q.fatalNAKLocked(NAKInvalidRequest, psn)
				return
			}
			q.inMsg = fSend
			q.rOff += copy(r.buf[q.rOff:], p.Payload)
		}
		if f&fLast != 0 {
			q.inMsg = 0
			q.completeRecvLocked(OpRecv, q.rOff, p.Imm)
			q.msn = (q.msn + 1) & PSNMask
		}
	}
	q.ePSN = (psn + 1) & PSNMask
	q.nakSent = false
	if p.BTH.AckReq() {
		q.setAckLocked(syndromeACKNoCredits, psn)
	}
}

// openLocked opens the gathered message with the hook, in place. A
// message that does not open is NAKed remote operational error (the queue
// pair goes to ERROR) and counted; it reports false.
//
// +checklocks:q.mu
func (q *QP) openLocked(psn uint32) ([]byte, bool) {
	nonce(&q.hk.nonce, q.a.PeerQPN, q.qpn, q.hk.rxPSN, epoch(&q.hk.rxEpoch, &q.hk.rxLast, q.hk.rxPSN))
	msg, err := q.hk.h.Open(q.hk.rx[:q.hk.rxN], &q.hk.nonce)
	if err != nil {
		q.d.st.HookRejected.Add(1)
		q.fatalNAKLocked(NAKRemoteOpError, psn)
		return nil, false
	}
	return msg, true
}

// lengthOKLocked checks a request packet's payload length n: a FIRST or
// MIDDLE packet carries exactly the path MTU, a LAST or ONLY one the rest
// of the message (max: the bytes left, or for a SEND at most the MTU).
//
// +checklocks:q.mu
func (q *QP) lengthOKLocked(f uint16, n, left int) bool {
	if f&fLast == 0 {
		return n == q.a.PathMTU && (f&fWrite == 0 || n < left)
	}
	if f&fWrite != 0 {
		return n == left && n <= q.a.PathMTU
	}
	return n <= q.a.PathMTU
}

// readLocked checks a READ request and queues its responses, reporting
// whether it did. A duplicate (dup) that finds the queue full is dropped
// and counted; a new one is NAKed.
//
// +checklocks:q.mu
func (q *QP) readLocked(p *Packet, dup bool) bool {
	psn := p.BTH.PSN()
	buf, ok := q.d.mr(p.RETH.RKey()).span(p.RETH.VA(), p.RETH.DMALength(), AccessRemoteRead)
	if !ok {
		if dup {
			q.d.st.ReadsDropped.Add(1)
			return false
		}
		q.fatalNAKLocked(NAKRemoteAccessError, psn)
		return false
	}
	if q.rdN == len(q.reads) {
		if dup {
			q.d.st.ReadsDropped.Add(1)
			return false
		}
		q.fatalNAKLocked(NAKInvalidRequest, psn)
		return false
	}
	if dup {
		// The requester asks again from psn: it has dropped whatever
		// answers from there on are still queued (go-back-N), so stop
		// sending them instead of making it wait through them.
		q.abortReadsFromLocked(psn)
	}
	msn := q.msn
	if !dup {
		msn = (msn + 1) & PSNMask
	}
	end := (psn + uint32(npkts(len(buf), q.a.PathMTU))) & PSNMask
	q.reads[(q.rdHead+q.rdN)%len(q.reads)] = readResp{psn: psn, end: end, first: true, rest: buf, msn: msn}
	q.rdN++
	// The responses acknowledge what came before: an ACK waiting with an
	// older PSN would only repeat them.
	if q.ackPending && q.ackSyn == syndromeACKNoCredits && psnDiff(q.ackPSN, psn) < 0 {
		q.ackPending = false
		q.d.st.AcksCoalesced.Add(1)
	}
	return true
}

// abortReadsFromLocked drops the queued READ responses from PSN psn on:
// the last queued READs whose answers reach psn or beyond.
//
// +checklocks:q.mu
func (q *QP) abortReadsFromLocked(psn uint32) {
	for q.rdN > 0 {
		r := &q.reads[(q.rdHead+q.rdN-1)%len(q.reads)]
		if psnDiff(r.end, psn) <= 0 {
			return
		}
		*r = readResp{}
		q.rdN--
		q.d.st.ReadsDropped.Add(1)
	}
}

// setAckLocked makes syn for psn the acknowledgement to send next,
// replacing one waiting unless that is a NAK for a PSN not older.
//
// +checklocks:q.mu
func (q *QP) setAckLocked(syn uint8, psn uint32) {
	if q.ackPending {
		if q.ackSyn&0x60 != 0 && syn&0x60 == 0 && psnDiff(psn, q.ackPSN) < 0 {
			return // keep the NAK: this ACK says less
		}
		if q.ackSyn&0x60 == 0 && syn&0x60 == 0 {
			q.d.st.AcksCoalesced.Add(1)
		}
	}
	q.ackPending, q.ackSyn, q.ackPSN, q.ackMSN = true, syn, psn, q.msn
}

// rnrNAKLocked answers a request that needs a receive buffer and finds
// none: an RNR NAK, and the packets that follow are dropped as out of
// sequence until the requester resends this one.
//
// +checklocks:q.mu
func (q *QP) rnrNAKLocked(psn uint32) {
	q.d.st.RNRNAKsSent.Add(1)
	q.nakSent = true
	q.setAckLocked(SyndromeRNRNAK|q.a.MinRNRTimer, psn)
}

// fatalNAKLocked answers an invalid request or a remote access error: a
// NAK, and the queue pair goes to ERROR (IBTA Vol. 1, 9.9.3.1.2, class
// C errors of a responder). Nothing of the request reaches memory.
//
// +checklocks:q.mu
func (q *QP) fatalNAKLocked(code uint8, psn uint32) {
	if code == NAKRemoteAccessError {
		q.d.st.AccessNAKsSent.Add(1)
	} else {
		q.d.st.InvalidNAKsSent.Add(1)
	}
	if q.inMsg == fSend && q.rqN > 0 {
		r := &q.rq[q.rqHead]
		st := StatusRemoteInvalid
		if r.wr.Length < 0 {
			st = StatusLocalLength
		}
		q.recvCQ.push(Completion{ID: r.wr.ID, QPN: q.qpn, Op: OpRecv, Status: st})
		q.rqHead = (q.rqHead + 1) % len(q.rq)
		q.rqN--
	}
	q.ackPending, q.ackSyn, q.ackPSN, q.ackMSN = true, SyndromeNAK|code, psn, q.msn
	q.toErrorLocked()
}

// completeRecvLocked completes the receive buffer at the head of the
// queue.
//
// +checklocks:q.mu
func (q *QP) completeRecvLocked(op WROp, n int, imm []byte) {
	r := &q.rq[q.rqHead]
	c := Completion{ID: r.wr.ID, QPN: q.qpn, Op: op, Bytes: n}
	if imm != nil {
		c.Imm, c.HasImm = binary.BigEndian.Uint32(imm), true
	}
	*r = rwqe{}
	q.rqHead = (q.rqHead + 1) % len(q.rq)
	q.rqN--
	q.recvCQ.push(c)
}

// npkts is the number of packets of an n-byte message at path MTU mtu.
func npkts(n, mtu int) int {
	if n == 0 {
		return 1
	}
	return (n + mtu - 1) / mtu
}
