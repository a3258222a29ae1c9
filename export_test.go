package tickwire

import "gvisor.dev/gvisor/pkg/tcpip/network/ipv4"

// NeighborCount returns the number of dynamic entries in netstack's own
// neighbor table, for tests checking the ARP bound against the real table.
func NeighborCount(s *Stack) int {
	entries, err := s.st.Neighbors(nicID, ipv4.ProtocolNumber)
	if err != nil {
		return -1
	}
	n := 0
	for _, e := range entries {
		if e.State.String() != "Static" {
			n++
		}
	}
	return n
}
