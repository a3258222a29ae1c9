// Package hwoffload is the host driver for the U50 offload engine: one
// register map (REGISTERS.md, kept equal to this package's constants by a
// test), the record slots of its four result rings, and a Device API on top
// of them for every backend.
//
// The engine (seed 000/001: IP/ARP/ICMP/UDP, a general TOE, a mirror TOE and
// a FAST user kernel on an Alveo U50) writes its results into four rings of
// SlotBytes slots: ring 0 trades, ring 1 orders, ring 2 events (TCP gaps,
// STEP sequence gaps, decode errors, flow starts and ends), ring 3 host-path
// notifications. A Slot reads and writes one record in place.
//
// A host opens an engine with Open (or OpenRegion for a mapping it holds),
// configures it while stopped, sets it running, and reads each ring with
// its Ring: Read returns the next slot in place (valid until the next Read,
// which releases it by storing CONS) and the number of records the engine
// dropped before it, seen as a jump in seq; Wait spins or sleeps for one.
// Reading and decoding a record allocates nothing.
//
//	dev, err := hwoffload.Open(ctx, "twin:/dev/shm/u50")
//	err = dev.Configure(hwoffload.Config{MirrorServer: netip.MustParseAddrPort("10.31.0.1:9129")})
//	err = dev.Run(ctx)
//	trades := dev.Ring(hwoffload.RingTrades)
//	for {
//		s, lost, err := trades.Wait(ctx, 0) // 0 spins; a duration sleeps between looks
//		...
//		s.Trade(&t)                         // typed sse.Trade, or s itself (the raw slot)
//	}
//
// The host path (the general TOE and UDP: REGISTERS.md, "Host path") is a
// command ring answered on ring 3: Listen, Dial and ListenUDP return a
// net.Listener, net.Conn and net.PacketConn over it, whose bytes go through
// each session's 32 KiB RX and TX buffers in the region; ARPTable reads the
// engine's ARP table. The first of them starts a goroutine that consumes
// ring 3: do not read ring 3 yourself then.
//
// Backends: the software twin (package hwoffload/twin, examples/u50twin)
// serves the same map from a shared file; package hwoffload/conformance
// checks any Device against the contract. The PCIe backend (OpenPCI,
// Open("pci:BDF")) maps BAR0 through sysfs and places the rings in VFIO DMA
// memory; REGISTERS.md says what of it is untested without a card.
package hwoffload
