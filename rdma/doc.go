// Package rdma is RoCEv2 in software: InfiniBand reliable-connection
// transport (IBTA Vol. 1, chapter 9) carried in UDP datagrams to port 4791
// (Annex A17), run on a tickwire.Stack.
//
// This file's first layer is the wire format: zero-copy views of the Base
// Transport Header (BTH), the RDMA (RETH) and ACK (AETH) extended transport
// headers and the immediate data, a Parse that validates a packet once, and
// the invariant CRC (ICRC) with the variant fields masked as Annex A17 says.
//
//	var p rdma.Packet
//	if err := rdma.Parse(udpPayload, &p); err != nil { ... }
//	op, psn := p.BTH.Opcode(), p.BTH.PSN()
//
// # Interoperability
//
// Linux's soft-RoCE (rxe) is not in the kernel this project is tested on
// (CONFIG_INFINIBAND is off), and no RDMA NIC is at hand: the wire format
// is checked against packets captured from a ConnectX-4 and computed by
// scapy's RoCE layer, and against tshark's InfiniBand dissector; interop
// with rxe or a ConnectX NIC stays to be shown by whoever has one.
package rdma
