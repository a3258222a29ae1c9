// Package arb arbitrates the lines of a market-data feed: venues publish
// the same sequenced datagrams on two or more lines (A and B, on two
// multicast groups or networks), and the receiver keeps the first copy of
// each sequence number, from whichever line brought it, and delivers one
// stream in sequence order.
//
// An Arbiter numbers units either with a function the user gives (one unit
// per datagram) or, by default, as MoldUDP64 packets (one unit per message,
// numbered from the packet's sequence number). It delivers every unit once,
// in order, through a Handler; counts duplicates; holds units that arrive
// ahead of a missing one; and declares a missing run lost, as a Gap with its
// range, when it has been missing for Config.GapTimeout. Until then a copy
// from any line that fills the hole is delivered in order; after, it is
// counted as late and dropped. MoldUDP64 sessions start at sequence number
// 1, so a loss at the very start is a gap from 1. Heartbeats and the end of
// session are understood: they reveal numbers that were sent but not
// received.
//
//	a, err := arb.New(arb.Config{GapTimeout: 50 * time.Millisecond}, handler)
//	...
//	for each datagram received on line i at time now {
//		a.Datagram(i, payload, now) // errors are counted in LineStats
//	}
//	a.End(now) // end of input: declare every open gap
//
// Time is the caller's: capture timestamps when reading a capture, wall
// time (or the link's receive time) live, in nanoseconds.
//
// Memory is fixed when the Arbiter is made and bounded by Config.Window and
// Config.SlotSize (see Arbiter); Datagram does not allocate. This package
// knows nothing of networks: it takes UDP payloads, wherever they come from.
package arb
