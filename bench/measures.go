package main

// The measures, in report order. Names and units are part of the bench's
// interface (issue #5): results are compared across runs by name.
var measures = []measure{
	{
		name: "tcp_rtt_64B", unit: "us", better: lower, latency: true, quick: true,
		baselineName: "kernel TCP, loopback",
		doc: "64-byte TCP ping-pong (write 64 bytes, read the 64-byte echo) between two tickwire " +
			"stacks over link/pipe in one process, net.Conn API; baseline: the same over two Go net " +
			"sockets on 127.0.0.1 (TCP_NODELAY, Go's default). Value: p50 round trip.",
		setup: setupTCPRTT,
	},
	{
		name: "udp_rtt_64B", unit: "us", better: lower, latency: true, quick: true,
		baselineName: "kernel UDP, loopback",
		doc:          "The same ping-pong with 64-byte UDP datagrams (DialUDP client, ListenUDP echo server).",
		setup:        setupUDPRTT(false),
	},
	{
		name: "udp_rtt_64B_latency", unit: "us", better: lower, latency: true, quick: true,
		baselineName: "kernel UDP, loopback",
		doc: "udp_rtt_64B with the server in latency mode (Config.Latency) answering from a " +
			"Stack.ServeUDP handler on the delivering goroutine; the client is unchanged " +
			"(DialUDP, Write then Read). Baseline: the same kernel loopback ping-pong.",
		setup: setupUDPRTT(true),
	},
	{
		name: "tcp_rtt_64B_latency", unit: "us", better: lower, latency: true, quick: true,
		baselineName: "kernel TCP, loopback",
		doc: "tcp_rtt_64B on tickwire's handler API in latency mode (Config.Latency): the server " +
			"echoes from a Stack.ServeTCP handler, the client writes and waits for its " +
			"TCPConn.OnReceive handler to count the echo (spinning on an atomic counter with " +
			"runtime.Gosched; over link/pipe the whole round trip usually runs inside the " +
			"client's Write). Baseline: the same kernel loopback ping-pong as tcp_rtt_64B.",
		setup: setupTCPRTTLatency,
	},
	{
		name: "tcp_rtt_64B_locked", unit: "us", better: lower, latency: true,
		baselineName: "tickwire, threads not locked",
		doc: "The cost of Config.LockOSThread on a goroutine that parks: tcp_rtt_64B's net.Conn " +
			"client against a Stack.ServeTCP echo handler (stock mode, so the handler runs on its " +
			"connection's goroutine), with that goroutine locked to its OS thread; baseline: the " +
			"same without LockOSThread. Over link/pipe there is no reader goroutine to lock.",
		setup: setupTCPRTTLocked,
	},
	{
		name: "udp_rx_64B", unit: "datagrams/s", better: higher, quick: true,
		baselineName: "kernel UDP, loopback",
		doc: "The highest rate at which a Stack.ServeUDP handler (default Config) receives 64-byte " +
			"datagrams with under 0.1% loss: a goroutine writes them through a DialUDP socket of a " +
			"second stack over link/pipe, paced to a target rate (first unpaced; when that loses 0.1% or more, halved " +
			"until a trial does not, then bisected), for a quarter of the sample's duration per " +
			"trial; loss is what was sent and never counted (the receiving stack's " +
			"Stats.DropUDPBufferFull and the pipe's drops end a trial's wait early). Value: the " +
			"highest received rate of a trial under the bound. Baseline: the same search for a " +
			"net.UDPConn sending over 127.0.0.1 to a socket read by a goroutine in " +
			"ReadFromUDPAddrPort, its receive buffer raised to 4 MiB (SO_RCVBUF, within the usual " +
			"net.core.rmem_max): with the default 212 KiB it lost 0.1% at about 31k datagrams/s on " +
			"a 2-core VM, its reader woken late. Over link/pipe the receiving stack runs on the sender's goroutine " +
			"(as the kernel's loopback runs the receive in the sender's system call), so a handler " +
			"slows the sender instead of losing datagrams.",
		setup: setupUDPRate(false),
	},
	{
		name: "udp_rx_64B_readfrom", unit: "datagrams/s", better: higher, quick: true,
		baselineName: "kernel UDP, loopback, ReadFrom",
		doc: "udp_rx_64B with a ListenUDP socket read by a goroutine in ReadFrom (one allocation per " +
			"datagram, the address), fed through the socket's receive ring " +
			"(bounded in bytes by Config.UDPReceiveBuffer, default 1 MiB: 10,922 datagrams of 64 bytes); " +
			"baseline: the kernel socket read with ReadFrom.",
		setup: setupUDPRate(true),
	},
	{
		name: "udp_listen_64k", unit: "s", better: lower, quick: true,
		baselineName: "kernel UDP sockets, scaled",
		doc: "Seconds to open a ListenUDP socket on every port (1 to 65535) of a fresh stack. " +
			"Baseline: opening 4,096 kernel UDP sockets (net.ListenUDP on 127.0.0.1, ephemeral " +
			"ports), scaled to 65,535.",
		setup: setupUDPListen,
	},
	{
		name: "udp_listen_64k_mem", unit: "B/listener", better: lower, quick: true,
		baselineName: "tickwire, 1,000 listeners",
		doc: "Go heap growth (after GC) per listener with udp_listen_64k's 65,535 ListenUDP " +
			"sockets; baseline: the same with 1,000 (a figure that grows with the count is a " +
			"cost that does not scale). Goal: 65,535 listeners in under 64 MiB.",
		setup: setupUDPListenMemory,
	},
	{
		name: "tcp_bulk", unit: "Gb/s", better: higher, quick: true,
		baselineName: "kernel TCP, loopback",
		doc: "One TCP stream, 64 KiB writes for the sample's duration, then a half-close; rate of " +
			"the bytes the receiver read by the time it saw the end. tickwire: default Config " +
			"(MSS 1408, 32 KiB buffers) over link/pipe, whose GSO carries segments of up to " +
			"the window in one frame, as loopback does. Allocations are per 64 KiB write.",
		setup: setupBulk,
	},
	{
		name: "tcp_bulk_latency", unit: "Gb/s", better: higher, quick: true,
		baselineName: "tickwire, stock mode",
		doc: "tcp_bulk with both stacks in latency mode (Config.Latency, otherwise the default " +
			"Config); baseline: the same stream between two stacks in stock mode. Issue goal: " +
			"at least 0.9x (a connection in latency mode that receives a snapshot must not lose " +
			"its throughput to delayed ACKs).",
		setup: setupBulkLatency,
	},
	{
		name: "tcp_bulk_2cores", unit: "Gb/s", better: higher, quick: true,
		baselineName: "tickwire, one connection",
		doc: "Two tcp_bulk streams at once, each between its own pair of stacks (default Config, " +
			"link/pipe), the sum of their rates; baseline: one such stream alone. On two cores the " +
			"issue's goal is at least 1.6x.",
		setup: setupBulk2Cores,
	},
	{
		name: "tcp_bulk_veth", unit: "Gb/s", better: higher, quick: true,
		baselineName: "kernel to kernel, veth",
		doc: "Root only. tcp_bulk from a kernel client in a network namespace to tickwire (default " +
			"Config, reading with net.Conn) on a TAP device in that namespace (link/tap); baseline: " +
			"the same stream from a kernel client to a kernel server in two namespaces joined by a " +
			"veth pair at MTU 1500 (the kernel's default offloads). Issue goal: at least 1.0x.",
		setup: setupBulkVeth,
	},
	{
		name: "rdma_write_lat_64B", unit: "us", better: lower, latency: true, quick: true,
		baselineName: "tickwire tcp_rtt_64B_latency",
		doc: "One-sided RoCEv2 RDMA WRITE of 64 bytes (package rdma, RC queue pair, path MTU 4096) " +
			"between two tickwire stacks in latency mode over link/pipe: PostSend, then poll the " +
			"completion queue (yielding between polls) until the WRITE's completion, which the " +
			"responder's ACK brings. Baseline: tickwire's own tcp_rtt_64B_latency ping-pong in the " +
			"same run. Goal (issue 19): at most 0.5x the TCP round trip.",
		setup: setupRDMAWriteLatency,
	},
	{
		name: "rdma_write_bw", unit: "Gb/s", better: higher, quick: true,
		baselineName: "tickwire tcp_bulk",
		doc: "RDMA WRITEs of 32 KiB (BALBOA's line-rate size), 16 outstanding, path MTU 4096, " +
			"over link/pipe (IP MTU 9000); rate of the bytes whose completions came back. " +
			"Baseline: tickwire's tcp_bulk stream (MSS 1408) in the same run.",
		setup: setupRDMAWriteBW,
	},
	{
		name: "rdma_aes_gcm_bw", unit: "Gb/s", better: higher, quick: true,
		baselineName: "rdma_write_bw without the hook",
		doc: "rdma_write_bw with the AES-256-GCM payload hook on both queue pairs (sealed at " +
			"PostSend, gathered and opened before memory): the ratio is the cost of the inline " +
			"offload in software. Baseline: the same WRITEs without the hook.",
		setup: setupRDMAAESGCMBW,
	},
	{
		name: "tcp_connect", unit: "conns/s", better: higher, quick: true,
		baselineName: "kernel TCP, loopback",
		doc: "Connections opened per second, one after another: dial, read the end of stream (the " +
			"server closes each connection as soon as it accepts it, so TIME-WAIT stays on its " +
			"side), close. Fresh stacks (and listener) every round.",
		setup: setupConnect,
	},
	{
		name: "tcp_churn_mem", unit: "B/conn", better: lower,
		baselineName: "tickwire, established idle connection",
		doc: "Go heap growth (after GC) per connection in TIME-WAIT: 10,000 connect/echo/close " +
			"cycles on one stack pair over link/pipe, the client closing first, then the heap " +
			"divided by the client's Stats.TCPTimeWait (a dial that reuses the port of a " +
			"connection in TIME-WAIT ends it, so a few hundred fewer than the cycles). Baseline: " +
			"the heap per established idle connection (both ends and the server's reader " +
			"goroutine, as tcp_10k_conns_mem), with 1,000 connections. Issue goal: at most 512 bytes.",
		setup: setupChurnMemory,
	},
	{
		name: "tcp_10k_conns", unit: "Gb/s", better: higher,
		baselineName: "tickwire, 100 connections",
		doc: "Aggregate throughput with 10,000 concurrent connections between two tickwire stacks " +
			"over link/pipe (Config.MaxConnections 10000), against the same with 100 connections " +
			"(the seed-002 engine kept 9 of 9.5 Gb/s). 4 writer goroutines each own a quarter of the " +
			"connections and write 16 KiB to each in turn; a reader goroutine per connection counts " +
			"what arrives during the sample. The pipe queues up to 65536 frames per direction (its " +
			"default 1024 overflows under this load and the drops turn into retransmission timeouts). " +
			"Allocations are per 16 KiB write.",
		setup: setupManyConns(false),
	},
	{
		name: "tcp_10k_conns_handler", unit: "Gb/s", better: higher,
		baselineName: "tickwire handlers, 100 connections",
		doc: "tcp_10k_conns with the server reading through the handler API: a Stack.ServeTCP " +
			"handler counts what arrives instead of a reader goroutine per connection (stock mode, " +
			"so each handler runs on its connection's goroutine). Baseline: the same with 100 " +
			"connections.",
		setup: setupManyConns(true),
	},
	{
		name: "tcp_10k_conns_kernel", unit: "Gb/s", better: higher,
		baselineName: "kernel TCP, 100 connections, loopback",
		doc: "Context for tcp_10k_conns, not a tickwire measure: its shape (4 writers, 16 KiB " +
			"writes in turn, a reader goroutine per connection) on kernel sockets over loopback, " +
			"10,000 connections against 100, so the ratio is what this machine's kernel keeps when " +
			"every write lands on a cold connection. Both ends are in the process, two open files a " +
			"connection: under a lower limit than 20,128 that cannot be raised, as many connections " +
			"as it allows (9,936 under the common 20,000).",
		setup: setupManyKernelConns,
	},
	{
		name: "tcp_10k_conns_mem", unit: "KiB/conn", better: lower,
		baselineName: "tickwire, 100 connections",
		doc: "Go heap growth (after GC) per established, idle connection, both ends and the " +
			"server's reader goroutine counted, with 10,000 connections and with 100. Goroutine " +
			"stacks are not heap and not included.",
		setup: setupManyConnsMemory(false),
	},
	{
		name: "tcp_10k_conns_stack", unit: "KiB/conn", better: lower,
		baselineName: "tickwire, 100 connections",
		doc: "Goroutine stack memory per established, idle connection, measured with " +
			"tcp_10k_conns_mem: the goroutines the connections added (the server's reader is the " +
			"one goroutine a connection has) times the stack the runtime gives a new goroutine " +
			"(/gc/stack/starting-size:bytes, the average stack size it scanned at the last " +
			"collection). Heap plus stacks, both ends, is what the issue's goal (at most twice " +
			"the configured buffers, 2 x 64 KiB) bounds.",
		setup: setupManyConnsMemory(true),
	},
	{
		name: "tap_tcp_rtt_64B", unit: "us", better: lower, latency: true, quick: true,
		baselineName: "kernel to kernel, veth",
		doc: "Root only. 64-byte TCP ping-pong from a kernel client in a network namespace to " +
			"tickwire on a TAP device in that namespace (link/tap); baseline: a kernel " +
			"client and a kernel echo server in two namespaces joined by a veth pair. Namespaces and " +
			"devices are named twb* and removed afterwards. Allocations are the whole process's per " +
			"round trip (tickwire's echo side).",
		setup: setupTapRTT(false),
	},
	{
		name: "tap_tcp_rtt_64B_latency", unit: "us", better: lower, latency: true, quick: true,
		baselineName: "kernel to kernel, veth",
		doc: "Root only. tap_tcp_rtt_64B with tickwire in latency mode, echoing from a " +
			"Stack.ServeTCP handler that runs on the TAP device's reader goroutine (no goroutine " +
			"woken between the device and the answer); the kernel client and the veth baseline " +
			"are unchanged.",
		setup: setupTapRTT(true),
	},
	{
		name: "tap_tcp_rtt_64B_latency_locked", unit: "us", better: lower, latency: true,
		baselineName: "tickwire, threads not locked",
		doc: "Root only. The cost of Config.LockOSThread where it matters: tap_tcp_rtt_64B_latency " +
			"(the echo handler runs on the TAP reader goroutine) with the reader locked to its " +
			"OS thread; baseline: the same on a second TAP device without LockOSThread.",
		setup: setupTapRTTLocked,
	},
	{
		name: "xdp_tcp_rtt_64B_latency", unit: "us", better: lower, latency: true, quick: true,
		baselineName: "kernel to kernel, veth",
		doc: "Root only (linux/amd64, linux/arm64, ethtool). 64-byte TCP ping-pong from a kernel " +
			"client in one network namespace to tickwire on AF_XDP (link/afxdp, copy mode, " +
			"program in veth's driver mode, no busy-polling) on the other end of a veth pair, " +
			"in latency mode with a Stack.ServeTCP echo handler on the endpoint's reader " +
			"goroutine; the kernel peer has checksum and segmentation offload off. Baseline: " +
			"kernel to kernel over veth, as for tap_tcp_rtt_64B. Issue goal: at most 0.8x.",
		setup: setupXDPRTT,
	},
	{
		name: "xdp_capture_latency", unit: "us", better: lower, latency: true, quick: true,
		baselineName: "AF_PACKET (link/afpacket)",
		doc: "Root only (linux/amd64, linux/arm64). Latency from just before an AF_PACKET " +
			"socket writes a one-trade frame into one end of a veth pair to the Trade callback " +
			"of a feed.Decoder (mirror + fast/sse) reading the other end through an " +
			"afxdp.Source filtered on the feed's port (copy mode, no busy-polling); baseline: " +
			"the same through afpacket.Source (TPACKET_V2) on a veth pair of its own. Issue " +
			"goal: at most 0.7x.",
		setup: setupXDPCapture,
	},
	{
		name: "xdp_rx_mpps", unit: "frames/s", better: higher,
		baselineName: "AF_PACKET (link/afpacket)",
		doc: "Root only (linux/amd64, linux/arm64, hping3). 64-byte UDP frames per second " +
			"returned by afxdp.Source (one queue, copy mode, filter on the frames' port) from " +
			"one end of a veth pair while hping3 --flood sends into the other; baseline: " +
			"afpacket.Source on a veth pair of its own under the same flood. On a 2-core " +
			"machine the flood and the reader share the cores, so the figure is bounded by " +
			"the sender as much as by the receiver.",
		setup: setupXDPRxRate,
	},
	{
		name: "fast_sse_decode", unit: "records/s", better: higher, quick: true,
		baselineName: "fast generic decoder",
		doc: "SSE Level-2 records decoded per second from a STEP stream (internal/capgen, 4000 " +
			"messages of 1 to 8 trade and order records) fed in 1408-byte chunks: the generated typed " +
			"path (sse.FeedDecoder) against step.Parser plus package fast's generic decoder on the " +
			"same bytes.",
		setup: setupFastDecode,
	},
	{
		name: "udp_mcast_rx_latency", unit: "us", better: lower, latency: true, quick: true,
		baselineName: "kernel to kernel, veth",
		doc: "Root only. One-way latency of a 64-byte multicast datagram: a kernel UDP sender in a " +
			"namespace sends to a group over a TAP device to tickwire, whose ServeUDP handler " +
			"joined the group (JoinGroup) and timestamps it; baseline: a kernel sender and a kernel " +
			"receiver joined to the group (a goroutine in ReadFrom) in two namespaces joined by a " +
			"veth pair. One datagram in flight at a time; each side reads time.Now in user code.",
		setup: setupMcastRx,
	},
	{
		name: "arbiter_ns", unit: "ns/datagram", better: lower, quick: true,
		baselineName: "plain copy of the datagram",
		doc: "Nanoseconds per datagram through arb.Arbiter: two lines of MoldUDP64 packets of " +
			"one 32-byte message, each line losing 1% (never both), A's copy then B's per " +
			"sequence number, 4096 sequence numbers per pass (a new session each pass), " +
			"in memory; baseline: copying each datagram into one buffer.",
		setup: setupArbiter,
	},
	{
		name: "mirror_reassembly", unit: "segments/s", better: higher, quick: true,
		baselineName: "gopacket/reassembly",
		doc: "Segments per second through the passive reassembler, 1408-byte segments of one flow " +
			"in order, frames in memory, mirror in its default mode (IPv4 and TCP checksums " +
			"verified); baseline: gopacket's DecodingLayerParser and reassembly.Assembler on the " +
			"same frames, which verify no checksum. Not the same work: see the _nochecksum and " +
			"_checksums measures for matched work.",
		setup: setupMirror(0, mirrorDefault),
	},
	{
		name: "mirror_reassembly_reorder10", unit: "segments/s", better: higher, quick: true,
		baselineName: "gopacket/reassembly",
		doc:          "mirror_reassembly with 10% of adjacent segment pairs swapped.",
		setup:        setupMirror(0.10, mirrorDefault),
	},
	{
		name: "mirror_reassembly_nochecksum", unit: "segments/s", better: higher,
		baselineName: "gopacket/reassembly",
		doc: "Matched work, no checksum on either side: mirror_reassembly with " +
			"mirror.ChecksumIgnore.",
		setup: setupMirror(0, mirrorNoChecksums),
	},
	{
		name: "mirror_reassembly_reorder10_nochecksum", unit: "segments/s", better: higher,
		baselineName: "gopacket/reassembly",
		doc:          "mirror_reassembly_nochecksum with 10% of adjacent segment pairs swapped.",
		setup:        setupMirror(0.10, mirrorNoChecksums),
	},
	{
		name: "mirror_reassembly_checksums", unit: "segments/s", better: higher,
		baselineName: "gopacket/reassembly + VerifyChecksum",
		doc: "Matched work, both sides verify every frame's IPv4 and TCP checksums: " +
			"mirror_reassembly (default mode) against gopacket calling its own IPv4.VerifyChecksum " +
			"and TCP.VerifyChecksum before reassembly.Assembler.",
		setup: setupMirror(0, mirrorChecksums),
	},
	{
		name: "mirror_reassembly_reorder10_checksums", unit: "segments/s", better: higher,
		baselineName: "gopacket/reassembly + VerifyChecksum",
		doc:          "mirror_reassembly_checksums with 10% of adjacent segment pairs swapped.",
		setup:        setupMirror(0.10, mirrorChecksums),
	},
	{
		name: "wire_to_trade", unit: "us", better: lower, latency: true, quick: true,
		baselineName: "gopacket/reassembly + fast generic",
		doc: "Latency from handing a frame to the reassembler to the typed Trade callback, one " +
			"trade per frame (feed.Decoder: mirror.Assembler and sse.FeedDecoder); baseline: gopacket reassembly, " +
			"step.Parser and the generic decoder.",
		setup: setupWireToTrade,
	},
	{
		name: "hwoffload_twin_latency", unit: "us", better: lower, latency: true, quick: true,
		baselineName: "feed.Decoder called directly",
		doc: "Latency from the offload engine's twin taking a pcap frame (the record's rx_cycles) to the " +
			"host reading the trade or order record from its ring (hwoffload.Ring.Read spinning on rings 0 " +
			"and 1 in another goroutine), over a 2000-message internal/capgen feed replayed as fast as the " +
			"twin takes it; baseline: feed.Decoder (mirror + fast/sse) called directly in the same run, from " +
			"HandleFrame to the record's callback. The seed's card: 468 ns to the mirror TOE, 678 ns with " +
			"FAST decoding (ILA cycle counts, not comparable end to end).",
		setup: setupTwinLatency,
	},
	{
		name: "hwoffload_ring_read", unit: "ns/record", better: lower, quick: true,
		baselineName: "Go channel of sse.Trade/sse.Order",
		doc: "Host cost per record of reading full result rings: hwoffload.Ring.Read and Slot.Trade / " +
			"Slot.Order (typed values decoded from the 128-byte slots, CONS stored per record) over the " +
			"records a twin wrote from a 2000-message feed; baseline: receiving the same records from " +
			"buffered Go channels filled beforehand. Allocations per record.",
		setup: setupRingRead,
	},
	{
		name: "dmaring_rx_mpps_64B_q1", unit: "Mpps", better: higher, quick: true,
		baselineName: "link/pipe",
		doc: "Host side of link/dmaring consuming pre-filled RX rings: nicsim puts 4096 64-byte " +
			"frames into the ring untimed (and pushes them out of the filling core's caches, as DMA " +
			"leaves them in the shared cache), then RxQueue.ReadFrames copies them out in batches of " +
			"64 (completions read, ring refilled, doorbell), timed, on a reader goroutine per queue " +
			"that spins between rounds. The rate is a round's frames over the median round's time. " +
			"Baseline: the same frames sent through link/pipe to a dispatcher that counts them.",
		setup: setupDmaringRx(1, 64),
	},
	{
		name: "dmaring_rx_mpps_64B_q2", unit: "Mpps", better: higher, quick: true,
		baselineName: "link/pipe, 2 pipes",
		doc: "dmaring_rx_mpps_64B_q1 with two queue pairs, one reader goroutine per RX queue " +
			"(no lock shared), 4096 frames each, a round timed from both readers running to both " +
			"done; baseline: two pipes, one sender goroutine each. Compare with the q1 row for the " +
			"scaling (goal 1.7x); it needs both cores: on a shared machine, run the bench at a " +
			"high priority (bench/README.md).",
		setup: setupDmaringRx(2, 64),
	},
	{
		name: "dmaring_rx_mpps_1408B_q1", unit: "Mpps", better: higher, quick: true,
		baselineName: "link/pipe",
		doc:          "dmaring_rx_mpps_64B_q1 with 1408-byte frames (each copied out of an 8 MiB ring of buffers).",
		setup:        setupDmaringRx(1, 1408),
	},
	{
		name: "dmaring_added_latency", unit: "us", better: lower, latency: true, quick: true,
		baselineName: "link/pipe",
		doc: "One 64-byte frame at a time from nicsim's Receive (descriptor, copy, completion) to " +
			"RxQueue.ReadFrames returning it on a reader goroutine that busy-polls (SetBusyPoll); " +
			"baseline: link/pipe's Send to its peer's dispatcher. The difference is what the rings " +
			"add. With the reader sleeping on the event queue's eventfd instead, see the package doc " +
			"and bench/README.md's note.",
		setup: setupDmaringLatency,
	},
	{
		name: "dmaring_mirror_segments", unit: "segments/s", better: higher, quick: true,
		baselineName: "mirror, frames in memory",
		doc: "mirror_reassembly's flow (1408-byte segments in order) read from an RX ring in place " +
			"(BorrowFrames, ReleaseBorrowed) after nicsim filled it untimed, checksums as the ring " +
			"verified them (Frame.ChecksumVerified, mirror.Assembler.HandleVerifiedLinkFrame, as " +
			"mirrorfeed -link dmaring does), against the same frames handed to mirror from memory, " +
			"which verifies their checksums itself (as from a pcap).",
		setup: setupDmaringMirror,
	},
	{
		name: "dmaring_wire_to_trade", unit: "us", better: lower, latency: true, quick: true,
		baselineName: "wire_to_trade (frame handed to feed)",
		doc: "wire_to_trade with the frame entering at the NIC: nicsim's Receive puts it in the RX " +
			"ring, a busy-polling reader borrows it and hands it to feed, timed to the Trade " +
			"callback; baseline: wire_to_trade's tickwire side, the frame handed to feed directly.",
		setup: setupDmaringWireToTrade,
	},
}
