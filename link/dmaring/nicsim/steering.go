package nicsim

// The device's TX queue order until the TX schedulers land: the TX queues
// are served round-robin.

// txRoundRobin rotates the TX queue the device serves first.
type txRoundRobin struct{ n int }

// next returns the queue to start a pass at, among queues.
func (r *txRoundRobin) next(queues int) int {
	r.n++
	if r.n >= queues {
		r.n = 0
	}
	return r.n
}
