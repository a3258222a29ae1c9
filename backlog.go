package tickwire

import "time"

// Bounds of the wait for a link's transmit backlog (see waitBacklog).
const (
	// txBacklogMax is the backlog, in frames, above which a Write waits:
	// about 20 ms of frames where a stack pair over link/pipe moves 50,000
	// frames a second on a loaded 2-core machine, a tenth of TCP's
	// minimum retransmission timeout (200 ms).
	txBacklogMax = 1024
	// txBacklogPoll is how often a waiting Write looks again.
	txBacklogPoll = 100 * time.Microsecond
	// txBacklogWait bounds one wait: the goroutine delivering the backlog
	// may be the waiting one, further up its stack (a Write on another
	// connection from a handler run inside a delivery), so a wait that
	// never ended could deadlock the link.
	txBacklogWait = 20 * time.Millisecond
)

// waitBacklog holds a Write while the link's transmit backlog is above
// txBacklogMax, for at most txBacklogWait, or until expired or done is
// closed (the Write's deadline, the connection's Close; the Write then
// finds out). It is TCP small queues for a link whose queue has no
// feedback to netstack: netstack counts a segment as sent when the link
// takes it, so 10,000 connections each writing a window queued 50,000
// frames (1 s) in link/pipe, past their 200 ms retransmission timeout,
// and every one of them timed out and retransmitted.
func (s *Stack) waitBacklog(expired, done <-chan struct{}) {
	if s.backlog.TxBacklog() <= txBacklogMax {
		return
	}
	s.writesHeld.Add(1)
	for start := time.Now(); s.backlog.TxBacklog() > txBacklogMax && time.Since(start) < txBacklogWait; {
		select {
		case <-expired:
			return
		case <-done:
			return
		default:
		}
		time.Sleep(txBacklogPoll) // the goroutine's own timer: no allocation
	}
}
