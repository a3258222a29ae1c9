package rdma

import "sync/atomic"

// Stats counts a Device's packets, and every packet dropped or NAKed and
// why. All counters only grow.
type Stats struct {
	TxPackets  uint64 // packets sent
	RxPackets  uint64 // datagrams received on port 4791
	SendErrors uint64 // packets the stack refused to send

	// Receive drops before a queue pair sees the packet.
	Malformed uint64 // Parse failed (unknown opcode, bad lengths)
	BadICRC   uint64 // the ICRC did not match
	UnknownQP uint64 // no queue pair with the BTH's destination QPN
	WrongPeer uint64 // from an address other than the queue pair's peer
	NotReady  uint64 // the queue pair's state does not take the packet (RESET, INIT, ERROR)

	// Responder.
	AcksSent        uint64 // ACKs sent
	AcksCoalesced   uint64 // acknowledgements merged into a later ACK
	Duplicates      uint64 // duplicate requests (re-acknowledged, or reads executed again)
	OutOfSequence   uint64 // requests ahead of the expected PSN, dropped
	SeqNAKsSent     uint64 // NAK sequence error sent (one per gap)
	RNRNAKsSent     uint64 // RNR NAKs sent: a SEND or WRITE with immediate found no receive buffer
	AccessNAKsSent  uint64 // NAK remote access error sent: bad rkey, bounds or access; nothing written
	InvalidNAKsSent uint64 // NAK invalid request (bad opcode sequence or length, too many reads) or remote operational error (HookRejected) sent
	ReadsDropped    uint64 // duplicate reads dropped with the read queue full
	HookRejected    uint64 // messages the payload hook refused (AES-GCM tag mismatch); never in memory

	// Requester.
	AcksReceived      uint64 // ACKs received
	StaleResponses    uint64 // ACKs and read responses for nothing outstanding, or repeated
	SeqNAKsReceived   uint64
	RNRNAKsReceived   uint64
	ErrorNAKsReceived uint64 // remote access, invalid request or operational error NAKs
	Retransmits       uint64 // packets sent again (go-back-N after a NAK or timeout)
	Timeouts          uint64 // retransmission timer expiries that resent
	RetryExceeded     uint64 // queue pairs that gave up (retry or RNR retry count exhausted)
}

// counters is Stats in atomics.
type counters struct {
	TxPackets, RxPackets, SendErrors                                         atomic.Uint64
	Malformed, BadICRC, UnknownQP, WrongPeer, NotReady                       atomic.Uint64
	AcksSent, AcksCoalesced, Duplicates, OutOfSequence, SeqNAKsSent          atomic.Uint64
	RNRNAKsSent, AccessNAKsSent, InvalidNAKsSent, ReadsDropped, HookRejected atomic.Uint64
	AcksReceived, StaleResponses, SeqNAKsReceived, RNRNAKsReceived           atomic.Uint64
	ErrorNAKsReceived, Retransmits, Timeouts, RetryExceeded                  atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		TxPackets: c.TxPackets.Load(), RxPackets: c.RxPackets.Load(), SendErrors: c.SendErrors.Load(),
		Malformed: c.Malformed.Load(), BadICRC: c.BadICRC.Load(), UnknownQP: c.UnknownQP.Load(),
		WrongPeer: c.WrongPeer.Load(), NotReady: c.NotReady.Load(),
		AcksSent: c.AcksSent.Load(), AcksCoalesced: c.AcksCoalesced.Load(), Duplicates: c.Duplicates.Load(),
		OutOfSequence: c.OutOfSequence.Load(), SeqNAKsSent: c.SeqNAKsSent.Load(), RNRNAKsSent: c.RNRNAKsSent.Load(),
		AccessNAKsSent: c.AccessNAKsSent.Load(), InvalidNAKsSent: c.InvalidNAKsSent.Load(),
		ReadsDropped: c.ReadsDropped.Load(), HookRejected: c.HookRejected.Load(),
		AcksReceived: c.AcksReceived.Load(), StaleResponses: c.StaleResponses.Load(),
		SeqNAKsReceived: c.SeqNAKsReceived.Load(), RNRNAKsReceived: c.RNRNAKsReceived.Load(),
		ErrorNAKsReceived: c.ErrorNAKsReceived.Load(), Retransmits: c.Retransmits.Load(),
		Timeouts: c.Timeouts.Load(), RetryExceeded: c.RetryExceeded.Load(),
	}
}
