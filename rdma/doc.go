// Package rdma is RoCEv2 in software: the InfiniBand reliable-connection
// transport (IBTA Vol. 1, chapter 9) carried in UDP datagrams to port 4791
// (Annex A17), run on a tickwire.Stack over any of its links (link/pipe,
// TAP, dmaring, AF_XDP).
//
//	dev, _ := rdma.Open(stack)                                   // serves UDP 4791
//	mr, _ := dev.RegisterMR(buf, rdma.AccessRemoteWrite)         // the peer writes here
//	cq, _ := rdma.NewCQ(256)
//	qp, _ := dev.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq})
//	_ = qp.Connect(rdma.QPAttrs{PeerAddr: peer, PeerQPN: q, RecvPSN: p, SendPSN: s})
//	_ = qp.PostSend(&rdma.SendWR{Op: rdma.OpWrite, Local: src, Length: n, RemoteAddr: a, RKey: k})
//	n, err := cq.Wait(ctx, completions)
//
// # What it does
//
//   - Wire format: zero-copy views of the Base Transport Header (BTH), the
//     RDMA (RETH) and ACK (AETH) extended transport headers and immediate
//     data; Parse validates a packet once; the invariant CRC (ICRC) with the
//     variant fields masked as Annex A17 says, computed on send and checked
//     on receive (a packet with a bad ICRC is dropped and counted).
//   - Queue pairs with the RC state machine (RESET, INIT, RTR, RTS, SQD,
//     ERROR) and the operations RDMA WRITE with and without immediate, RDMA
//     READ, SEND with and without immediate into posted receive buffers.
//     Messages are cut into FIRST, MIDDLE and LAST packets at the path MTU
//     (256 to 4096 bytes of payload).
//   - The responder's rules: PSN sequencing, one NAK sequence error per
//     gap, duplicates re-acknowledged (a duplicate READ answered again,
//     cutting short the answers queued from its PSN on), RNR NAK when a
//     SEND or WRITE with immediate finds no receive buffer, remote access
//     and invalid request NAKs (bad rkey, bounds or access; bad opcode
//     sequence or length; too many READs) after which the queue pair is in
//     ERROR, as the spec's class C responder errors say. Nothing of a
//     refused request reaches memory.
//   - The requester's: go-back-N from the PSN a NAK names or, after the
//     local ACK timeout (QPAttrs.Timeout), from the oldest unacknowledged
//     one, at most RetryCount times without progress; the RNR timer from
//     the NAK's timer code (RNRDelay), RNRRetry times (7: forever); the
//     AckReq bit on the last packet of a message and every 16th packet;
//     the responder coalesces ACKs (one for the newest PSN when several
//     are due).
//   - An inline payload hook (QPConfig.Hook, PayloadHook) between the
//     transport and memory, as BALBOA's offloads sit: each WRITE and SEND
//     message is sealed before it is cut into packets and opened by the
//     responder before any of it reaches memory. AESGCM is AES-256-GCM with
//     nonces from the PSN space (NonceSize says how); a message whose tag
//     fails is NAKed and counted (Stats.HookRejected).
//   - Memory regions with an rkey, a virtual address (below 2^53) and
//     access flags; completion queues polled (CQ.Poll) or waited on
//     (CQ.Wait), completions in the order the requests were posted.
//
// # Threads and costs
//
// A packet is processed on the goroutine that delivers its datagram
// (tickwire's UDP handler path): a WRITE lands in memory, and its ACK is
// sent, before the delivery returns. A queue pair sends from whichever
// goroutine finds work (a PostSend, a delivery, a timer) and no other
// goroutine sending, at most 32 packets at a time (pumpBudget); the rest
// goes on a goroutine of the Device, so that a long READ answer does not
// hold up the receive handler. The data path allocates nothing per packet
// or per work request (TestDataPathAllocs).
//
// # Bounds
//
// Every table has a bound; what does not fit is refused or dropped and
// counted (Stats, CQ.Overflows).
//   - Queue pairs per Device: MaxQPs (256). Memory regions: MaxMRs (1024),
//     each under 2 GiB.
//   - Send queue: QPConfig.SendQueue work requests (default 128, at most
//     MaxSendQueue); PostSend fails with ErrSendQueueFull beyond it. Receive
//     queue: QPConfig.RecvQueue (default 128, at most MaxRecvQueue).
//   - PSNs in flight: Window (256) past the oldest unacknowledged one.
//     READs in flight: MaxReadsInFlight (16) per requester, and as many
//     queued answers per responder; a new READ beyond them is NAKed invalid
//     request, a duplicate one dropped [ReadsDropped].
//   - Completion queues: the depth given to NewCQ (at most MaxCQDepth); a
//     completion that finds its queue full is dropped and counted
//     (CQ.Overflows).
//
// # Interoperability
//
// Linux's soft-RoCE (rxe) is not in the kernel this project is tested on
// (CONFIG_INFINIBAND is off), and no RDMA NIC is at hand: the wire format
// is checked against packets captured from a ConnectX-4 and computed by
// scapy's RoCE layer, and against tshark's InfiniBand dissector; interop
// with rxe or a ConnectX NIC stays to be shown by whoever has one.
// DESIGN.md lists where this package departs from the specification,
// notably how the receive side rebuilds the IPv4 header the ICRC covers
// (with the datagram's own identification, UDPConn.RxIPv4ID).
package rdma
