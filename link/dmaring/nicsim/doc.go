// Package nicsim is a software NIC that serves a link/dmaring region the
// way a Corundum (mqnic) card serves its queues: it maps the region, takes
// frames from the TX rings and puts them on a wire, puts frames from the
// wire into the RX rings, and writes completions, events and interrupts.
//
//	ep, _ := dmaring.New(dmaring.Config{})
//	a, b := pipe.New(pipe.Options{})
//	dev, err := nicsim.New(nicsim.Config{Region: ep.Region(), Wakeups: ep.Wakeups(), Wire: nicsim.NewPipeWire(a)})
//	defer dev.Close()
//
// Wires: PipeWire (one end of a link/pipe: another device or a stack is the
// peer), TapWire (a Linux TAP device: the kernel is the peer; partial
// checksums the kernel leaves are completed, as a NIC's would be on the
// wire) and Replay (a frame.Source such as a pcap file, at recorded pace
// or full speed, optionally stamped with the capture times and without loss).
//
// # Serving
//
// One goroutine serves the TX queues, one frame at a time from the queue
// the TX scheduler picks (Config.TxScheduler: RoundRobin by default, a
// TDMAScheduler for time slots), carrying out each descriptor's checksum
// command, handing the frame to the wire and completing the descriptor.
// The link has a rate (Config.LinkRate, default 10 Gbit/s): frames leave
// one after another, each taking LinkRate.FrameTime, and a TX completion is
// stamped with the time its frame finished, start plus frame time. Receiving runs on
// the wire's goroutine (Receive): one RX descriptor and completion per
// frame, with the one's complement sum of the frame after the Ethernet
// header (rx_csum), the device clock's stamp, and the RSS hash and hash type
// (rx_hash, rx_hash_type). Config.RSS picks the RX queue (RSS.Classify): by
// default a Toeplitz hash of the IPv4 addresses and TCP or UDP ports under
// DefaultRSSKey, spread over all RX queues, so a flow's frames always share
// a queue; frames RSS does not hash go to queue 0. Each queue, CQ and EQ has
// its own lock on the device side, so RX queues and TX do not contend.
//
// With Wakeups the TX goroutine sleeps when no doorbell moved (after
// Config.Poll of polling) and the host wakes it; without, it polls,
// yielding between passes. It raises an interrupt (notifies the event
// queue's Notifier) when it writes an event to an armed event queue, and a
// completion event when it completes on an armed completion queue.
//
// # The device clock
//
// Clock starts from the host's real-time clock and advances with the
// monotonic clock, PTP-like. Every RX and TX completion carries its time
// (nanoseconds and the low 16 bits of seconds, as mqnic's do); the device
// clock register in the region header holds the full seconds, rewritten
// whenever they change, from which the host extends the stamps.
//
// # Bad input
//
// The device never trusts the region: a queue whose base address is not
// 4 KiB aligned, whose ring lies outside the ring area, whose log2 size is
// out of range, whose CQ or EQ number does not exist, or whose producer
// pointer is more than a ring ahead is refused (its status register holds
// the dmaring.ErrCode) until the host disables it; a descriptor with a
// length of 0 or beyond the buffer size, or an address outside the buffer
// area, is completed with an error status; a received frame longer than its
// buffer is dropped with an error completion. Each raises an error event
// and is counted (Stats.Errors, the region header, the queue's register),
// and the other queues keep serving. A region whose header does not match
// its size is refused by New. FuzzDevice drives the device with random
// rings and registers.
package nicsim
