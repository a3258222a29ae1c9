// Package dmaring is a link endpoint on NIC descriptor rings laid out as
// Corundum's mqnic driver lays them out (github.com/corundum/corundum,
// modules/mqnic), in a memory region shared by the host (this package) and
// a device: the software NIC in link/dmaring/nicsim today, a ring-based
// card later.
//
//	ep, err := dmaring.New(dmaring.Config{Queues: 2})
//	dev, err := nicsim.New(nicsim.Config{Region: ep.Region(), Wakeups: ep.Wakeups(), Wire: wire})
//	s, err := tickwire.New(tickwire.Config{Link: ep, MAC: ep.MAC(), Addr: netip.MustParsePrefix("10.0.0.1/24")})
//	defer dev.Close() // after s.Close, which closes ep
//
// # The region
//
// New creates the region in a memfd (default), a file under /dev/shm
// (Config.Path) or Go memory (Config.InMemory, the only kind off Linux, for
// a device in the same process). The host owns its layout; the device maps
// it (Region.Map, OpenRegion) and checks it (ReadLayout). Addresses in
// descriptors and register blocks are byte offsets in the region: the
// region is the device's whole DMA address space. All offsets are bytes.
//
//	offset                  size              contents
//	0x0000                  4 KiB             header (below)
//	0x1000 (HdrRegs)        5N x 128          register blocks: N EQs, 2N CQs, N TX queues, N RX queues
//	HdrRingArea (4 KiB al.) per queue pair:   EQ (256 x 32), TX CQ and RX CQ (2^RingLog x 32 each),
//	                                          TX and RX rings (2^RingLog x 16 each), each 4 KiB aligned
//	HdrBufArea (4 KiB al.)  2N x 2^RingLog x BufSize   buffers: TX ring i's, then RX ring i's, one per descriptor
//
// Header, written once by the host before any device maps the region:
//
//	0x00 magic "TWDR"   0x04 version 1   0x08/0x0C region size (lo/hi)   0x10 N (queue pairs)
//	0x14 register blocks   0x18 ring area   0x1C buffer area   0x20 its length   0x24 BufSize
//	0x28 features (RX csum, TX csum, timestamps)   0x2C log2 ring size   0x30 log2 EQ size
//
// Written by the device only:
//
//	0x40 clock seqlock (odd while written)   0x44 ns   0x48/0x4C seconds (lo/hi)
//	0x80 state (1 running, 2 stopped)   0x84 errors raised   0x88 last ErrCode   0x8C its queue (kind<<16|index)
//	0x90 1 while the device sleeps waiting for a doorbell
//
// Queue register block (one per EQ, CQ, TX queue and RX queue; 128 bytes):
//
//	0x00 base address lo (4 KiB aligned; bits 11:0 mqnic's VF, must be 0)   0x04 base hi
//	0x08 control: bit 0 enable, 31:16 generation   0x0C bits 31:24 log2 size, 23:0 CQN (queue) / EQN (CQ)
//	0x10 host's pointer: producer of a TX/RX queue (the doorbell), consumer of a CQ/EQ
//	0x14 arm (CQ, EQ): the host sets 1, the device clears it when it fires
//	0x40 device's pointer: consumer of a TX/RX queue, producer of a CQ/EQ
//	0x44 status: bit 3 active, bits 23:16 ErrCode   0x48 errors on this queue
//
// The host programs a block with mqnic's command words (Regs.Command:
// CmdSetEnable, CmdSetSize, CmdSetCQN, CmdSetProdPtr, CmdSetConsPtr,
// CmdSetConsPtrArm, CmdSetArm) and SetBase, in the order mqnic's driver
// opens a queue: disable, base, size, CQN, pointers, enable. TX queue i
// completes on CQ 2i, RX queue i on CQ 2i+1; both CQs raise events on EQ i.
//
// Entries, little-endian, as in mqnic_hw.h: a descriptor (TX and RX) is
// u16 reserved, u16 tx_csum_cmd, u32 len, u64 addr; a completion is u16
// queue, u16 index, u16 len, u16 -, u32 ts_ns, u16 ts_s, u16 rx_csum, u32
// rx_hash, u8 rx_hash_type, u8 port, u8 status, u8 flags, u32 -, u32 phase;
// an event is u16 type, u16 source, u32 code, ..., u32 phase.
//
// # The phase bit
//
// Exactly mqnic's rule (mqnic_process_rx_cq, mqnic_process_eq): a CQ or EQ
// starts filled with 0x01 bytes (phase bit 0) and consumer pointer 0; the
// entry at consumer pointer c of a ring of size s is new when its phase bit
// differs from c&s (EntryIsNew). The device writes phase 1 on its first
// lap, 0 on the second (PhaseFor), so the host never needs to clear an
// entry it consumed.
//
// # Publishing
//
// Each side writes an entry's plain fields first and publishes with one
// atomic store: the host stores the producer pointer after writing
// descriptors and frame bytes (the doorbell), the device stores the phase
// word after writing a completion's fields and the frame. The reader does
// an atomic load of that word before it reads the rest. The consumer
// pointer a side returns is likewise an atomic store after it is done with
// the entries.
//
// # Where tickwire differs from mqnic, and why
//
//   - Pointer words. mqnic packs the producer and consumer pointers into
//     one 32-bit register (0x10, halves at 0x10 and 0x12) that only the
//     hardware writes, on commands. Here both sides write memory, and Go has
//     no 16-bit atomics, so each pointer is a 32-bit word of its own (16 bits
//     used, PtrMask) written by one side only, the host's in the first 64
//     bytes of the block and the device's in the second, so the two sides do
//     not write one cache line. The doorbell (SET_PROD_PTR) is an atomic store
//     of the host's word.
//   - Commands are applied by the host to the register words (there is no
//     hardware to decode them); the device reads and checks the
//     configuration when it sees a queue enabled, and again whenever the
//     control word's generation (moved by every SET_ENABLE) changed, so a
//     disable and re-enable it did not watch is not missed.
//   - Addresses are offsets in the region, not bus addresses.
//   - Completions carry a status byte (an ErrCode, in mqnic's rsvd2) and a
//     flags byte (rsvd3: CplFlagCsum, rx_csum is valid); events add error
//     events (EventTypeError) with the ErrCode and queue kind in rsvd words.
//   - A device clock register (0x40) holds the full time; completions keep
//     mqnic's 16 low bits of seconds, which the host extends with it.
//   - The doorbell has no hardware to see it: a device that sleeps says so
//     (0x90), and the host then notifies it (below).
//   - No descriptor blocks (scatter/gather): one descriptor, one buffer.
//
// # Goroutines, polling and wake-ups
//
// While a stack is attached, one goroutine per RX queue reads the queue's
// completions and delivers each frame inline, copied into a new packet, in
// batches of up to 64 (mqnic_process_rx_cq). It returns the CQ consumer
// pointer and refills the RX ring (rings the RX doorbell) once at least 8
// entries wait, as mqnic_refill_rx_buffers batches its refill (a quarter of
// rings under 32 entries), and always before it sleeps: a frame then costs
// the device no reread of a line the host just wrote. The consumer pointer
// is stored before the refill, so the device never holds a descriptor it
// has no completion room for. ReleaseBorrowed follows the same rule.
// The queues share no lock. WritePackets copies each packet into a TX
// buffer of queue pkt.Hash mod N under that queue's mutex, reclaims the
// buffers of completed descriptors, and rings the doorbell once per call.
//
// Waiting: a reader that finds its completion queue empty polls it for
// SetBusyPoll's budget (0 by default; tickwire's latency mode sets it),
// looking 64 times per clock reading and yielding its P once every 5 us so
// that goroutines sharing it run, then
// arms its CQ and EQ, looks once more (the device stores a completion's
// phase and then reads the arm word; the host stores the arm word and then
// reads the phase; one of them sees the other) and sleeps on its event
// queue's Notifier, an eventfd on Linux. The device, on writing a completion
// to an armed CQ, disarms it, writes a completion event to its EQ and, when
// the EQ is armed, disarms it and notifies its eventfd: mqnic's interrupt.
// The device sleeps likewise: it sets the sleep word, looks at the TX
// doorbells once more and waits on its own Notifier, which the host
// notifies after a TX doorbell when it sees the word set (an RX refill
// needs no wake-up: the device reads the RX producer pointer when a frame
// arrives). Busy, neither side sleeps: the cost
// per frame is then the atomics above, no system call.
//
// Across processes (Config.Shared, and examples/nicsim as the device) the
// Notifiers are futex words in the region's header instead (RegionWakeups:
// a Notify bumps the word and calls FUTEX_WAKE; a Wait calls FUTEX_WAIT
// while the word is unchanged), so nothing but the region file passes
// between the two processes; the host also writes its MAC in the header
// (Region.HostMAC), for a device whose wire needs it. A waiter then holds
// its thread in futex(2), where an eventfd parks only its goroutine. The
// eventfds of the in-process form could be passed over a Unix socket
// instead; the futex words need no socket and no handshake, and either side
// may start first after the host created the region.
//
// # Frame sources and borrowing
//
// Without a stack, each RxQueue is a frame.Source (one goroutine per queue):
// ReadFrames copies frames into the caller's buffers; BorrowFrames points
// the frames at the ring's buffers instead, valid until ReleaseBorrowed,
// which gives them back to the device. Frames carry the completion's
// device-clock stamp in Unix nanoseconds (frame.Frame.Time) and its RSS
// hash and hash type (frame.Frame.Hash, HashType: HashTypeIPv4 and the
// others, Corundum's encoding), the same for every frame of a flow
// direction.
//
// # TX timestamps
//
// With Config.TxStamps, each TX completion's device-clock stamp (when the
// frame's last bit left: nicsim stamps the start on the link plus the
// frame's time at the link rate) is kept with the frame's length, IPv4
// flow and TCP sequence number and payload length, read from the TX buffer
// when the host reclaims the completion (the buffer is not reused before).
// Endpoint.TxStamps reclaims and returns them: a trading engine polls it
// after sending and finds an order's wire time by its connection's
// sequence numbers. A queue keeps the last 2^RingLog stamps; older ones
// not taken are dropped and counted (Stats.TxStampsLost). Off, reclaiming
// reads nothing but the completions' phase and status.
//
// # Checksums
//
// The endpoint reports TX and RX checksum offload. On TX, for IPv4 TCP and
// UDP, it stores the pseudo-header sum in the checksum field and sets
// tx_csum_cmd (start, offset), and the device completes the checksum, as
// mqnic_tx.c asks of the card. On RX the device puts the one's complement
// sum of everything after the Ethernet header in rx_csum (mqnic's
// CHECKSUM_COMPLETE); the endpoint checks the IPv4 header and, with that sum
// and the pseudo-header, the TCP, UDP or ICMP checksum without reading the
// payload, drops the frames that fail and counts them
// (link.ChecksumDropCounter). A padded frame, or one from a device without
// the sum, is checked in full.
//
// # Bad input
//
// The device checks everything it reads from the region: a queue with a
// misaligned base, a log2 size out of range, a ring outside the ring area,
// a bad CQN or EQN, or a producer pointer more than the ring size ahead is
// refused (its status holds the ErrCode) and the other queues keep
// running; a descriptor with a length of 0 or beyond the buffer size, or an
// address outside the buffer area, is completed with an error status. Each
// error is counted and raises an error event. The host takes completions'
// lengths and indexes as untrusted too (counted as bad completions), and
// returns a queue's device error from ReadFrames (a *DeviceError) and
// Endpoint.Err.
package dmaring
