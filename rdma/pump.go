package rdma

import (
	"encoding/binary"
)

// pump sends what the queue pair has to send, one packet at a time, until
// there is nothing: READ responses, the waiting ACK or NAK, then requests.
// One goroutine pumps at a time; another that finds it pumping returns at
// once (the pumper picks its work up). The lock is not held while a packet
// is written: over link/pipe the write delivers the packet, and maybe the
// answer to it, before it returns.
func (q *QP) pump() {
	q.mu.Lock()
	if q.pumping {
		q.mu.Unlock()
		return
	}
	q.pumping = true
	for sent := 0; ; sent++ {
		if sent == pumpBudget {
			// Leave the rest to the device's goroutine: a long READ
			// answer sent from a receive handler would otherwise hold
			// the socket's handler, and the requests that could cut it
			// short (a repeated READ after a loss) would wait behind it.
			if q.hasWorkLocked() {
				q.d.kick(q)
			}
			break
		}
		n := q.nextPacketLocked()
		if n == 0 {
			break
		}
		to := q.remote
		q.mu.Unlock()
		if _, err := q.d.conn.WriteToUDPAddrPort(q.tx[:n], to); err != nil {
			q.d.st.SendErrors.Add(1)
		} else {
			q.d.st.TxPackets.Add(1)
		}
		q.mu.Lock()
	}
	q.pumping = false
	q.mu.Unlock()
}

// pumpBudget is the number of packets a pump sends before it hands the
// rest to the device's goroutine.
const pumpBudget = 32

// hasWorkLocked reports whether the queue pair has a packet to send
// without building it (requests may still be held by the window).
//
// +checklocks:q.mu
func (q *QP) hasWorkLocked() bool {
	return q.rdN > 0 || q.ackPending || q.sqNext != q.sqTail
}

// nextPacketLocked builds the next packet into q.tx and returns its
// length, 0 when there is nothing to send.
//
// +checklocks:q.mu
func (q *QP) nextPacketLocked() int {
	if q.state == StateReset || q.state == StateInit {
		return 0
	}
	if q.rdN > 0 && q.state != StateError {
		return q.readResponsePacketLocked()
	}
	if q.ackPending {
		q.ackPending = false
		if q.ackSyn&0x60 == 0 {
			q.d.st.AcksSent.Add(1)
		}
		BTH(q.tx).Encode(&BTHFields{Opcode: OpAcknowledge, PKey: DefaultPKey, DestQP: q.a.PeerQPN, PSN: q.ackPSN})
		AETH(q.tx[BTHSize:]).Encode(q.ackSyn, q.ackMSN)
		return q.finishLocked(BTHSize + AETHSize)
	}
	if (q.state != StateRTS && q.state != StateSQD) || q.rnrWait {
		return 0
	}
	return q.requestPacketLocked()
}

// finishLocked appends the ICRC to the n bytes in q.tx.
//
// +checklocks:q.mu
func (q *QP) finishLocked(n int) int {
	binary.LittleEndian.PutUint32(q.tx[n:], icrcFor(&q.txHdr, q.d.local, q.remote, q.tx[:n]))
	return n + ICRCSize
}

// payloadLocked copies b after the h header bytes in q.tx, pads it to 4
// bytes and finishes the packet.
//
// +checklocks:q.mu
func (q *QP) payloadLocked(h int, b []byte) int {
	n := h + copy(q.tx[h:], b)
	pad := (4 - len(b)%4) % 4
	for i := 0; i < pad; i++ {
		q.tx[n+i] = 0
	}
	q.tx[BTHFlagsOffset] |= uint8(pad) << 4
	return q.finishLocked(n + pad)
}

// readResponsePacketLocked sends the next packet of the oldest READ.
//
// +checklocks:q.mu
func (q *QP) readResponsePacketLocked() int {
	r := &q.reads[q.rdHead]
	mtu := q.a.PathMTU
	chunk := min(len(r.rest), mtu)
	last := len(r.rest) <= mtu
	var op Opcode
	switch {
	case r.first && last:
		op = OpReadResponseOnly
	case r.first:
		op = OpReadResponseFirst
	case last:
		op = OpReadResponseLast
	default:
		op = OpReadResponseMid
	}
	BTH(q.tx).Encode(&BTHFields{Opcode: op, PKey: DefaultPKey, DestQP: q.a.PeerQPN, PSN: r.psn})
	h := BTHSize
	if opFlags[op]&fAeth != 0 {
		AETH(q.tx[h:]).Encode(syndromeACKNoCredits, r.msn)
		h += AETHSize
	}
	n := q.payloadLocked(h, r.rest[:chunk])
	r.rest = r.rest[chunk:]
	r.psn = (r.psn + 1) & PSNMask
	r.first = false
	if last {
		*r = readResp{}
		q.rdHead = (q.rdHead + 1) % len(q.reads)
		q.rdN--
	}
	return n
}

// requestPacketLocked sends the next request packet: go-back-N resends
// from sqNext/sqPkt, then new requests, within the window.
//
// +checklocks:q.mu
func (q *QP) requestPacketLocked() int {
	for q.sqNext != q.sqTail {
		w := q.wqe(q.sqNext)
		// Skip what was acknowledged since a rewind.
		if d := psnDiff(q.unacked, w.psn); d > int32(q.sqPkt) && w.wr.Op != OpRead {
			if d >= int32(w.npkts) {
				q.sqNext, q.sqPkt = q.sqNext+1, 0
				continue
			}
			q.sqPkt = uint32(d)
		}
		break
	}
	if q.sqNext == q.sqTail {
		return 0
	}
	w := q.wqe(q.sqNext)
	psn := (w.psn + q.sqPkt) & PSNMask
	fresh := psnDiff(psn, q.sentPSN) >= 0
	if fresh && q.state == StateSQD && q.sqPkt == 0 {
		return 0 // drained: start nothing new
	}
	if psnDiff(psn, q.unacked) >= Window {
		return 0
	}
	mtu := q.a.PathMTU
	var n int
	if w.wr.Op == OpRead {
		if !w.readOut {
			if q.readsOut >= MaxReadsInFlight {
				return 0
			}
			w.readOut = true
			q.readsOut++
		}
		off := int(q.sqPkt) * mtu
		w.reqStart = q.sqPkt
		BTH(q.tx).Encode(&BTHFields{Opcode: OpReadRequest, PKey: DefaultPKey, DestQP: q.a.PeerQPN, PSN: psn})
		RETH(q.tx[BTHSize:]).Encode(w.wr.RemoteAddr+uint64(off), w.wr.RKey, uint32(len(w.buf)-off))
		n = q.finishLocked(BTHSize + RETHSize)
		q.advanceLocked(w, w.npkts-q.sqPkt, fresh)
		return n
	}
	k := q.sqPkt
	first, last := k == 0, k == w.npkts-1
	off := int(k) * mtu
	chunk := w.wire[off:min(off+mtu, len(w.wire))]
	imm := w.wr.Op == OpWriteImm || w.wr.Op == OpSendImm
	var op Opcode
	if w.wr.Op == OpWrite || w.wr.Op == OpWriteImm {
		op = OpWriteMiddle
		switch {
		case first && last:
			op = OpWriteOnly
		case first:
			op = OpWriteFirst
		case last:
			op = OpWriteLast
		}
	} else {
		op = OpSendMiddle
		switch {
		case first && last:
			op = OpSendOnly
		case first:
			op = OpSendFirst
		case last:
			op = OpSendLast
		}
	}
	if last && imm {
		op++ // the _IMM opcode follows its plain one
	}
	ackReq := last || (k+1)%ackEvery == 0
	BTH(q.tx).Encode(&BTHFields{Opcode: op, PKey: DefaultPKey, DestQP: q.a.PeerQPN, AckReq: ackReq, PSN: psn})
	h := BTHSize
	if opFlags[op]&fReth != 0 {
		RETH(q.tx[h:]).Encode(w.wr.RemoteAddr, w.wr.RKey, uint32(len(w.wire)))
		h += RETHSize
	}
	if opFlags[op]&fImm != 0 {
		binary.BigEndian.PutUint32(q.tx[h:], w.wr.Imm)
		h += ImmSize
	}
	n = q.payloadLocked(h, chunk)
	q.advanceLocked(w, 1, fresh)
	return n
}

// advanceLocked moves the send position k PSNs on in w, past the packet
// just built, arms the retransmission timer and counts a resend.
//
// +checklocks:q.mu
func (q *QP) advanceLocked(w *swqe, k uint32, fresh bool) {
	q.sqPkt += k
	end := (w.psn + q.sqPkt) & PSNMask
	if q.sqPkt >= w.npkts {
		q.sqNext, q.sqPkt = q.sqNext+1, 0
	}
	if !fresh {
		q.d.st.Retransmits.Add(1)
	}
	if psnDiff(end, q.sentPSN) > 0 {
		q.sentPSN = end
	}
	if !q.timerArmed {
		q.timerArmed = true
		q.progress = false
		q.timer.Reset(q.a.Timeout)
	}
}
