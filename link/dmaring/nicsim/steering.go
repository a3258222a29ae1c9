package nicsim

// The device's queue choices until receive-side scaling and the TX
// schedulers land: every received frame goes to RX queue 0 and the TX
// queues are served round-robin. The Device's steer field is a classifier,
// the method set of an RSS classifier (Classify returns hash, hash type
// and queue), so RSS replaces rxSteering by being assigned to it.

// classifier picks the RX queue of a frame and the hash the completion
// carries.
type classifier interface {
	Classify(frame []byte) (hash, hashType uint32, queue int)
}

// rxSteering steers every frame to queue 0 with no hash.
type rxSteering struct{}

// Classify returns hash 0, hash type 0 and queue 0.
func (rxSteering) Classify([]byte) (hash, hashType uint32, queue int) { return 0, 0, 0 }

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
