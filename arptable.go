package tickwire

import (
	"net"
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// ARPEntry is one entry of a Stack's ARP table.
type ARPEntry struct {
	Addr netip.Addr       // IPv4
	MAC  net.HardwareAddr // nil while unresolved
	// Resolved is true when MAC is known and in use (netstack's
	// Reachable, Stale, Delay, Probe or Static states); false while a
	// resolution is in progress or has failed.
	Resolved bool
}

// ARPTable returns the entries of the stack's ARP table, static ones
// (Config.StaticARP) included: at most Config.ARPEntries dynamic ones, so
// the copy is bounded. It allocates the slice it returns; call it to
// inspect the table, not per packet.
func (s *Stack) ARPTable() []ARPEntry {
	ns, err := s.st.Neighbors(nicID, ipv4.ProtocolNumber)
	if err != nil {
		return nil
	}
	out := make([]ARPEntry, 0, len(ns))
	for _, n := range ns {
		if n.Addr.Len() != 4 {
			continue
		}
		e := ARPEntry{Addr: netip.AddrFrom4(n.Addr.As4())}
		switch n.State {
		case gstack.Reachable, gstack.Stale, gstack.Delay, gstack.Probe, gstack.Static:
			if n.LinkAddr != "" {
				e.MAC = net.HardwareAddr(string(n.LinkAddr))
				e.Resolved = true
			}
		}
		out = append(out, e)
	}
	return out
}
