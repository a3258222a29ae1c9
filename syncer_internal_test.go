package tickwire

import "testing"

// TestLeaveACK: the ACK a processing leaves to a Read goes to that Read
// only while that same Read runs. When it ended meanwhile, the processing
// settles the ACK itself, also when another Read has begun: that one may
// wait for the data the ACK lets the peer send (latency-mode bulk
// transfer stalled until the sender's retransmission timeout).
func TestLeaveACK(t *testing.T) {
	var c TCPConn
	c.latReads.Store(1) // a Read runs
	if c.leaveACK(1) {
		t.Error("the Read still runs, yet the processing settles the ACK")
	}
	if !c.latACK.Load() {
		t.Error("the ACK was not left to the Read")
	}
	c.latACK.Store(false)

	// The Read ended (2) and another began (3) before the flag was set.
	c.latReads.Store(3)
	if !c.leaveACK(1) {
		t.Error("a later Read got the ACK of data an earlier Read took")
	}
	if c.latACK.Load() {
		t.Error("the flag stays set after the processing took it")
	}

	// The Read ended and none runs: the processing settles too.
	c.latReads.Store(2)
	if !c.leaveACK(1) {
		t.Error("the ended Read got the ACK")
	}
}
