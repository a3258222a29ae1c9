package rdma

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// QPState is a queue pair's state (IBTA Vol. 1, 10.3.1).
type QPState uint8

// Queue pair states.
const (
	StateReset QPState = iota
	StateInit
	StateRTR // ready to receive: the responder runs
	StateRTS // ready to send: requester and responder run
	StateSQD // send queue drained: started requests finish, new ones wait
	StateError
)

var stateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "ERROR"}

// String returns the spec's name of the state.
func (s QPState) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "QPState(?)"
}

// Bounds of a queue pair.
const (
	// MaxSendQueue and MaxRecvQueue bound QPConfig's queue depths.
	MaxSendQueue = 4096
	MaxRecvQueue = 4096
	// DefaultQueueDepth is the default of both.
	DefaultQueueDepth = 128
	// MaxReadsInFlight is the number of RDMA READs a requester has
	// outstanding at a time, and the responder resources a responder
	// keeps for them (read requests beyond it are NAKed invalid request).
	MaxReadsInFlight = 16
	// Window is the number of PSNs the requester sends ahead of the oldest
	// unacknowledged one.
	Window = 256
	// ackEvery sets the AckReq bit on every 16th packet of a long message,
	// beside the last, so that ACKs keep the window open.
	ackEvery = 16
	// MaxMessage is the longest message (2 GiB - 1: the RETH's DMA length
	// is 32 bits, memory regions are below 2 GiB).
	MaxMessage = 1<<31 - 1
)

// Errors of queue pair methods.
var (
	ErrQPState        = errors.New("rdma: queue pair not in a state that allows this")
	ErrSendQueueFull  = errors.New("rdma: send queue full")
	ErrRecvQueueFull  = errors.New("rdma: receive queue full")
	ErrBadWorkRequest = errors.New("rdma: bad work request")
	ErrAttrs          = errors.New("rdma: bad queue pair attributes")
)

// QPConfig configures CreateQP.
type QPConfig struct {
	SendCQ, RecvCQ *CQ // where completions go (may be the same CQ); required
	SendQueue      int // send work requests outstanding; default DefaultQueueDepth, at most MaxSendQueue
	RecvQueue      int // receive work requests posted; default DefaultQueueDepth, at most MaxRecvQueue

	// Hook, when not nil, transforms every WRITE and SEND message (see
	// PayloadHook). The queue pair then holds HookSlots sealed messages
	// of at most HookMessage bytes in flight (defaults DefaultHookSlots,
	// DefaultHookMessage; at most MaxHookSlots, MaxHookMessage): PostSend
	// fails with ErrSendQueueFull when all slots are taken, and the
	// responder gathers one message of at most HookMessage bytes. Memory:
	// (HookSlots+1) x (HookMessage + Overhead) bytes, allocated here.
	Hook        PayloadHook
	HookSlots   int
	HookMessage int
}

// QPAttrs are the attributes that move a queue pair to RTR and RTS: what
// the two ends exchange to connect (see Exchange and ConnInfo).
type QPAttrs struct {
	PeerAddr netip.Addr // the peer's IPv4 address; its UDP port is 4791
	PeerQPN  uint32     // the peer's QPN (24 bits)
	RecvPSN  uint32     // the first PSN the peer sends (the responder's expected PSN)
	SendPSN  uint32     // this end's first PSN
	// PathMTU is the payload of a full packet: 256, 512, 1024, 2048 or
	// 4096 (default 1024). Its packets must fit the stack's IPv4 MTU:
	// PathMTU + 64 bytes of headers at most.
	PathMTU int
	// Timeout is the local ACK timeout: without an ACK for that long the
	// requester resends from the oldest unacknowledged PSN. Default
	// 16.8 ms (the spec's 4.096 us x 2^12).
	Timeout time.Duration
	// RetryCount is the number of times the requester resends after a
	// timeout without progress before it gives up (0 to 7, default 7).
	RetryCount int
	// RNRRetry is the number of RNR NAKs the requester takes for one
	// request before it gives up (0 to 7; 7, the default, means forever).
	RNRRetry int
	// MinRNRTimer is the 5-bit RNR timer code this end's RNR NAKs carry
	// (see RNRDelay); default 12 (0.64 ms).
	MinRNRTimer uint8
	// NoRetryDefaults makes a zero RetryCount and RNRRetry mean zero.
	NoRetryDefaults bool
}

// SendWR is a work request for the send queue.
type SendWR struct {
	ID     uint64 // returned in the completion
	Op     WROp   // OpWrite, OpWriteImm, OpRead, OpSend or OpSendImm
	Local  *MR    // the local buffer: the source, or for OpRead the destination
	Offset int    // into Local
	Length int    // bytes; 0 is allowed
	// RemoteAddr and RKey name the peer's memory for WRITE and READ.
	RemoteAddr uint64
	RKey       uint32
	Imm        uint32 // immediate data of OpWriteImm and OpSendImm
}

// RecvWR is a receive buffer for SENDs (and the completion slot of
// WRITEs with immediate).
type RecvWR struct {
	ID     uint64
	Local  *MR // must allow AccessLocalWrite
	Offset int
	Length int
}

type swqe struct {
	wr      SendWR
	buf     []byte // the local bytes
	psn     uint32 // first PSN
	npkts   uint32 // PSNs used: packets, or a READ's response packets
	acked   bool
	readGot int // READ: response bytes received
	// reqStart is the response packet the last READ request sent asked
	// from (0, or where a resend picked up).
	reqStart uint32
	wire     []byte // the sealed message, with a hook (a slot of hookState.free)
	readOut  bool
	status   Status
}

// hookState is a hooked queue pair's buffers and nonce state.
type hookState struct {
	h       PayloadHook
	max     int      // longest message
	free    [][]byte // sealed-message slots not in use
	rx      []byte   // the responder's gathering buffer
	txEpoch uint16   // wraps of the sender's message PSNs
	txLast  uint32
	rxEpoch uint16 // and of the receiver's
	rxLast  uint32
	rxN     int    // bytes gathered
	rxPSN   uint32 // first PSN of the message being gathered
	nonce   [NonceSize]byte
}

// epoch returns the wrap count for a message with first PSN psn after
// one with first PSN *last, counting a wrap when the PSN went down.
func epoch(e *uint16, last *uint32, psn uint32) uint16 {
	if psn < *last {
		*e++
	}
	*last = psn
	return *e
}

type rwqe struct {
	wr  RecvWR
	buf []byte
}

// readResp is a READ the responder answers.
type readResp struct {
	psn   uint32 // PSN of the next response packet
	end   uint32 // one past the PSN of the last
	first bool
	rest  []byte // bytes still to send (alias the region)
	msn   uint32
}

// QP is a reliable-connection queue pair. Create it with Device.CreateQP,
// connect it with Connect (or Init, ReadyToReceive, ReadyToSend), post
// work with PostSend and PostRecv, and collect completions from its CQs.
//
// All methods are safe for concurrent use. Packets are processed on the
// goroutine that delivers them and sent by whichever goroutine finds work
// to send and no other sending (one at a time, in PSN order): a post, a
// delivery, or the retransmission timer's goroutine.
type QP struct {
	d      *Device
	qpn    uint32
	sendCQ *CQ
	recvCQ *CQ

	mu sync.Mutex
	// +checklocks:mu
	state QPState
	// +checklocks:mu
	a QPAttrs
	// +checklocks:mu
	remote netip.AddrPort

	// requester
	// +checklocks:mu
	sq []swqe
	// +checklocks:mu
	sqHead, sqNext, sqTail uint64 // absolute indices: oldest, next to send, next free
	// +checklocks:mu
	sqPkt uint32 // packet index in sq[sqNext]
	// +checklocks:mu
	nextPSN uint32 // first PSN of the next posted request
	// +checklocks:mu
	unacked uint32 // oldest PSN not acknowledged
	// +checklocks:mu
	sentPSN uint32 // one past the highest PSN sent
	// +checklocks:mu
	readsOut int
	// +checklocks:mu
	retries, rnrRetries int
	// +checklocks:mu
	progress, timerArmed, rnrWait bool
	// +checklocks:mu
	rewound bool
	// +checklocks:mu
	rewoundAt uint32
	timer     *time.Timer
	rnrTimer  *time.Timer

	// responder
	// +checklocks:mu
	ePSN uint32
	// +checklocks:mu
	msn uint32
	// +checklocks:mu
	nakSent bool
	// +checklocks:mu
	inMsg uint16 // fWrite or fSend while a message is in progress
	// +checklocks:mu
	wbuf []byte // WRITE: the rest of the target bytes
	// +checklocks:mu
	wlen int
	// +checklocks:mu
	wleft int // WRITE: bytes of the message still to come
	// +checklocks:mu
	rOff int // SEND: bytes received into rq's head
	// +checklocks:mu
	rq []rwqe
	// +checklocks:mu
	rqHead, rqN int
	// +checklocks:mu
	ackPending bool
	// +checklocks:mu
	ackSyn uint8
	// +checklocks:mu
	ackPSN uint32
	// +checklocks:mu
	ackMSN uint32
	// +checklocks:mu
	reads [MaxReadsInFlight]readResp
	// +checklocks:mu
	rdHead, rdN int

	// +checklocks:mu
	hk hookState

	// +checklocks:mu
	pumping bool
	// tx is the packet being built and sent; only the goroutine that set
	// pumping touches it.
	kicked atomic.Bool // queued for the device's goroutine
	tx     []byte
	txHdr  [icrcScratch]byte
}

// CreateQP creates a queue pair in RESET.
func (d *Device) CreateQP(cfg QPConfig) (*QP, error) {
	if cfg.SendCQ == nil || cfg.RecvCQ == nil {
		return nil, ErrAttrs
	}
	if cfg.SendQueue == 0 {
		cfg.SendQueue = DefaultQueueDepth
	}
	if cfg.RecvQueue == 0 {
		cfg.RecvQueue = DefaultQueueDepth
	}
	if cfg.SendQueue < 1 || cfg.SendQueue > MaxSendQueue || cfg.RecvQueue < 1 || cfg.RecvQueue > MaxRecvQueue {
		return nil, ErrAttrs
	}
	var hk hookState
	if cfg.Hook != nil {
		if cfg.HookSlots == 0 {
			cfg.HookSlots = DefaultHookSlots
		}
		if cfg.HookMessage == 0 {
			cfg.HookMessage = DefaultHookMessage
		}
		if cfg.HookSlots < 1 || cfg.HookSlots > MaxHookSlots || cfg.HookMessage < 1 || cfg.HookMessage > MaxHookMessage {
			return nil, ErrAttrs
		}
		hk.h, hk.max = cfg.Hook, cfg.HookMessage
		size := cfg.HookMessage + cfg.Hook.Overhead()
		hk.rx = make([]byte, size)
		for range cfg.HookSlots {
			hk.free = append(hk.free, make([]byte, size))
		}
	}
	q := &QP{d: d, sendCQ: cfg.SendCQ, recvCQ: cfg.RecvCQ, hk: hk,
		sq: make([]swqe, cfg.SendQueue), rq: make([]rwqe, cfg.RecvQueue),
		tx: make([]byte, maxHdrLen+4096+ICRCSize)}
	q.timer = time.AfterFunc(time.Hour, q.onTimeout)
	q.timer.Stop()
	q.rnrTimer = time.AfterFunc(time.Hour, q.onRNRTimer)
	q.rnrTimer.Stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	if len(d.qps) >= MaxQPs {
		return nil, ErrTooManyQPs
	}
	for d.qps[d.nextQPN] != nil || d.nextQPN < 2 {
		d.nextQPN = (d.nextQPN + 1) & PSNMask
	}
	q.qpn = d.nextQPN
	d.nextQPN = (d.nextQPN + 1) & PSNMask
	d.qps[q.qpn] = q
	return q, nil
}

// QPN returns the queue pair number.
func (q *QP) QPN() uint32 { return q.qpn }

// State returns the current state.
func (q *QP) State() QPState {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.state
}

// Init moves the queue pair from RESET to INIT: receive buffers may be
// posted from now on.
func (q *QP) Init() error { return q.move(StateReset, StateInit) }

// move changes the state from from to to, or fails with ErrQPState.
func (q *QP) move(from, to QPState) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.state != from {
		return ErrQPState
	}
	q.state = to
	return nil
}

// ReadyToReceive moves the queue pair from INIT to RTR with a's peer,
// PathMTU, RecvPSN and MinRNRTimer: the responder answers from now on.
func (q *QP) ReadyToReceive(a *QPAttrs) error {
	if !a.PeerAddr.Is4() || a.PeerQPN > PSNMask || a.RecvPSN > PSNMask || a.MinRNRTimer > 31 {
		return ErrAttrs
	}
	mtu := a.PathMTU
	if mtu == 0 {
		mtu = 1024
	}
	if mtu&(mtu-1) != 0 || mtu < 256 || mtu > 4096 || mtu+28+maxHdrLen+ICRCSize > q.d.mtu {
		return ErrAttrs
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.state != StateInit {
		return ErrQPState
	}
	q.a.PeerAddr, q.a.PeerQPN, q.a.RecvPSN, q.a.PathMTU = a.PeerAddr, a.PeerQPN, a.RecvPSN, mtu
	q.a.MinRNRTimer = a.MinRNRTimer
	if q.a.MinRNRTimer == 0 {
		q.a.MinRNRTimer = 12
	}
	q.remote = netip.AddrPortFrom(a.PeerAddr, UDPPort)
	q.ePSN = a.RecvPSN
	q.state = StateRTR
	return nil
}

// ReadyToSend moves the queue pair from RTR to RTS with a's SendPSN,
// Timeout, RetryCount and RNRRetry: work requests may be posted.
func (q *QP) ReadyToSend(a *QPAttrs) error {
	retry, rnr := a.RetryCount, a.RNRRetry
	if !a.NoRetryDefaults {
		if retry == 0 {
			retry = 7
		}
		if rnr == 0 {
			rnr = 7
		}
	}
	if a.SendPSN > PSNMask || retry < 0 || retry > 7 || rnr < 0 || rnr > 7 || a.Timeout < 0 {
		return ErrAttrs
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.state != StateRTR {
		return ErrQPState
	}
	q.a.SendPSN, q.a.RetryCount, q.a.RNRRetry, q.a.Timeout = a.SendPSN, retry, rnr, a.Timeout
	if q.a.Timeout == 0 {
		q.a.Timeout = 4096 * time.Nanosecond << 12
	}
	q.nextPSN, q.unacked, q.sentPSN = a.SendPSN, a.SendPSN, a.SendPSN
	q.state = StateRTS
	return nil
}

// Connect runs Init, ReadyToReceive and ReadyToSend with a.
func (q *QP) Connect(a QPAttrs) error {
	if err := q.Init(); err != nil {
		return err
	}
	if err := q.ReadyToReceive(&a); err != nil {
		return err
	}
	return q.ReadyToSend(&a)
}

// Drain moves the queue pair from RTS to SQD: requests already started
// finish, later ones wait for Resume.
func (q *QP) Drain() error { return q.move(StateRTS, StateSQD) }

// Resume moves the queue pair from SQD back to RTS.
func (q *QP) Resume() error {
	if err := q.move(StateSQD, StateRTS); err != nil {
		return err
	}
	q.pump()
	return nil
}

// Drained reports whether the send queue has nothing started and not
// completed.
func (q *QP) Drained() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.sqHead == q.sqTail || psnDiff(q.sentPSN, q.sq[q.sqHead%uint64(len(q.sq))].psn) <= 0
}

// SetError moves the queue pair to ERROR: outstanding work requests
// complete with StatusFlushed.
func (q *QP) SetError() {
	q.mu.Lock()
	q.toErrorLocked()
	q.mu.Unlock()
}

// Destroy moves the queue pair to ERROR and removes it from its Device.
func (q *QP) Destroy() {
	q.SetError()
	q.d.mu.Lock()
	if q.d.qps[q.qpn] == q {
		delete(q.d.qps, q.qpn)
	}
	q.d.mu.Unlock()
}

// PostSend queues wr. It fails with ErrSendQueueFull when QPConfig's
// SendQueue requests are outstanding, ErrQPState outside RTS and SQD, and
// ErrBadWorkRequest when the local bytes are outside Local or Local does
// not allow the access. It allocates nothing.
func (q *QP) PostSend(wr *SendWR) error {
	if wr.Length < 0 || wr.Length > MaxMessage || wr.Offset < 0 || wr.Local == nil ||
		wr.Offset > wr.Local.Len() || wr.Length > wr.Local.Len()-wr.Offset {
		return ErrBadWorkRequest
	}
	switch wr.Op {
	case OpWrite, OpWriteImm, OpSend, OpSendImm:
	case OpRead:
		if wr.Local.access&AccessLocalWrite == 0 {
			return ErrBadWorkRequest
		}
	default:
		return ErrBadWorkRequest
	}
	q.mu.Lock()
	if q.state != StateRTS && q.state != StateSQD {
		q.mu.Unlock()
		return ErrQPState
	}
	if q.sqTail-q.sqHead == uint64(len(q.sq)) {
		q.mu.Unlock()
		return ErrSendQueueFull
	}
	w := &q.sq[q.sqTail%uint64(len(q.sq))]
	buf := wr.Local.buf[wr.Offset : wr.Offset+wr.Length]
	wire := buf
	if q.hk.h != nil {
		if wr.Op == OpRead || wr.Length > q.hk.max {
			q.mu.Unlock()
			return ErrHookMessage
		}
		if len(q.hk.free) == 0 {
			q.mu.Unlock()
			return ErrSendQueueFull
		}
		slot := q.hk.free[len(q.hk.free)-1]
		q.hk.free = q.hk.free[:len(q.hk.free)-1]
		nonce(&q.hk.nonce, q.qpn, q.a.PeerQPN, q.nextPSN, epoch(&q.hk.txEpoch, &q.hk.txLast, q.nextPSN))
		wire = q.hk.h.Seal(slot[:0], buf, &q.hk.nonce)
	}
	n := uint32(npkts(len(wire), q.a.PathMTU))
	*w = swqe{wr: *wr, buf: buf, wire: wire, psn: q.nextPSN, npkts: n}
	q.nextPSN = (q.nextPSN + n) & PSNMask
	q.sqTail++
	q.mu.Unlock()
	q.pump()
	return nil
}

// PostRecv posts a receive buffer. It fails with ErrRecvQueueFull when
// QPConfig's RecvQueue buffers are posted, ErrQPState in RESET and ERROR.
func (q *QP) PostRecv(wr RecvWR) error {
	if wr.Local == nil || wr.Local.access&AccessLocalWrite == 0 || wr.Offset < 0 || wr.Length < 0 ||
		wr.Offset > wr.Local.Len() || wr.Length > wr.Local.Len()-wr.Offset {
		return ErrBadWorkRequest
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.state == StateReset || q.state == StateError {
		return ErrQPState
	}
	if q.rqN == len(q.rq) {
		return ErrRecvQueueFull
	}
	q.rq[(q.rqHead+q.rqN)%len(q.rq)] = rwqe{wr: wr, buf: wr.Local.buf[wr.Offset : wr.Offset+wr.Length]}
	q.rqN++
	return nil
}

// psnDiff returns a - b in the 24-bit PSN space, from -2^23 to 2^23-1.
func psnDiff(a, b uint32) int32 { return int32(a<<8-b<<8) >> 8 }

// +checklocks:q.mu
func (q *QP) wqe(i uint64) *swqe { return &q.sq[i%uint64(len(q.sq))] }

// toErrorLocked enters ERROR and flushes both queues.
//
// +checklocks:q.mu
func (q *QP) toErrorLocked() {
	if q.state == StateError {
		return
	}
	q.state = StateError
	q.timer.Stop()
	q.rnrTimer.Stop()
	for ; q.sqHead != q.sqTail; q.sqHead++ {
		w := q.wqe(q.sqHead)
		st := w.status
		if st == StatusSuccess {
			st = StatusFlushed
		}
		q.sendCQ.push(Completion{ID: w.wr.ID, QPN: q.qpn, Op: w.wr.Op, Status: st})
		q.freeSlotLocked(w)
		*w = swqe{}
	}
	q.sqNext = q.sqHead
	for ; q.rqN > 0; q.rqN-- {
		r := &q.rq[q.rqHead]
		q.recvCQ.push(Completion{ID: r.wr.ID, QPN: q.qpn, Op: OpRecv, Status: StatusFlushed})
		*r = rwqe{}
		q.rqHead = (q.rqHead + 1) % len(q.rq)
	}
	q.inMsg = 0
	q.wbuf = nil
	q.rdN = 0
}

// receive handles one packet for this queue pair from peer.
func (q *QP) receive(p *Packet, peer netip.Addr) {
	q.mu.Lock()
	if peer != q.remote.Addr() {
		q.mu.Unlock()
		q.d.st.WrongPeer.Add(1)
		return
	}
	if opFlags[p.BTH.Opcode()]&fReq != 0 {
		if q.state != StateRTR && q.state != StateRTS && q.state != StateSQD {
			q.mu.Unlock()
			q.d.st.NotReady.Add(1)
			return
		}
		q.respondLocked(p)
	} else {
		if q.state != StateRTS && q.state != StateSQD {
			q.mu.Unlock()
			q.d.st.NotReady.Add(1)
			return
		}
		q.requesterLocked(p)
	}
	q.mu.Unlock()
	q.pump()
}
