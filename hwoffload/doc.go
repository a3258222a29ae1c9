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
// Backends: the software twin (package hwoffload/twin) serves the same map
// from a shared file. The PCIe backend and the general TOE / UDP host path
// (the command ring) are not implemented yet; REGISTERS.md says what is
// missing.
package hwoffload
