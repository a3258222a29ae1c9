package rdma

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// WROp is the operation of a work request or completion.
type WROp uint8

// Work request operations. OpRecv and OpRecvWriteImm appear only in
// completions of the receive queue: a SEND, and a WRITE with immediate
// (which consumes a receive request and reports its immediate data and
// length, its data having gone where the WRITE said).
const (
	OpWrite WROp = iota + 1
	OpWriteImm
	OpRead
	OpSend
	OpSendImm
	OpRecv
	OpRecvWriteImm
)

var wrOpNames = [...]string{"", "WRITE", "WRITE_IMM", "READ", "SEND", "SEND_IMM", "RECV", "RECV_WRITE_IMM"}

// String returns the operation's name.
func (o WROp) String() string {
	if int(o) < len(wrOpNames) && o != 0 {
		return wrOpNames[o]
	}
	return "WROp(?)"
}

// Status is a completion's status.
type Status uint8

// Completion statuses (the verbs' IBV_WC_* names in Go form).
const (
	StatusSuccess          Status = iota
	StatusRemoteAccess            // the responder NAKed a remote access error
	StatusRemoteInvalid           // the responder NAKed an invalid request
	StatusRemoteOp                // the responder NAKed a remote operational error
	StatusRetryExceeded           // no ACK after the retry count's retransmissions
	StatusRNRRetryExceeded        // receiver not ready after the RNR retry count
	StatusFlushed                 // the QP went to ERROR before the request completed
	StatusLocalLength             // a received SEND was longer than the receive buffer
	StatusLocalProtection         // the local region does not allow the access
)

var statusNames = [...]string{"success", "remote access error", "remote invalid request", "remote operational error",
	"retry exceeded", "RNR retry exceeded", "flushed", "local length error", "local protection error"}

// String returns the status in words.
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "status(?)"
}

// Completion reports a finished work request.
type Completion struct {
	ID     uint64 // the work request's ID
	QPN    uint32
	Op     WROp
	Status Status
	Bytes  int    // bytes moved: for a receive, the message's length
	Imm    uint32 // immediate data, valid when HasImm
	HasImm bool
}

// CQ is a completion queue: a bounded ring of completions that one or more
// queue pairs fill and the program polls or waits on. A completion that
// finds the ring full is dropped and counted in Overflows (size the queue
// for the work requests in flight: a QP's send and receive queue depths).
// Safe for concurrent use.
type CQ struct {
	mu sync.Mutex
	// +checklocks:mu
	ring []Completion
	// +checklocks:mu
	head int
	// +checklocks:mu
	n        int
	notify   chan struct{}
	overflow atomic.Uint64
}

// MaxCQDepth bounds a completion queue.
const MaxCQDepth = 1 << 16

// ErrCQDepth is NewCQ's error for a depth out of range.
var ErrCQDepth = errors.New("rdma: completion queue depth out of range")

// NewCQ returns a completion queue of depth entries (1 to MaxCQDepth).
func NewCQ(depth int) (*CQ, error) {
	if depth < 1 || depth > MaxCQDepth {
		return nil, ErrCQDepth
	}
	return &CQ{ring: make([]Completion, depth), notify: make(chan struct{}, 1)}, nil
}

// push appends c, reporting false (and counting) when the ring is full.
func (q *CQ) push(c Completion) bool {
	q.mu.Lock()
	if q.n == len(q.ring) {
		q.mu.Unlock()
		q.overflow.Add(1)
		return false
	}
	q.ring[(q.head+q.n)%len(q.ring)] = c
	q.n++
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
	return true
}

// Poll moves up to len(dst) completions, oldest first, into dst and
// returns how many. It never blocks and allocates nothing.
func (q *CQ) Poll(dst []Completion) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := 0
	for k < len(dst) && q.n > 0 {
		dst[k] = q.ring[q.head]
		q.head = (q.head + 1) % len(q.ring)
		q.n--
		k++
	}
	return k
}

// Wait polls, blocking until at least one completion is there or ctx
// ends (then it returns ctx's error). It allocates nothing.
func (q *CQ) Wait(ctx context.Context, dst []Completion) (int, error) {
	for {
		if n := q.Poll(dst); n > 0 || len(dst) == 0 {
			return n, nil
		}
		select {
		case <-q.notify:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// Len returns the number of completions waiting.
func (q *CQ) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// Overflows returns the number of completions dropped on a full queue.
func (q *CQ) Overflows() uint64 { return q.overflow.Load() }
