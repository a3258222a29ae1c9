package nicsim_test

import (
	"fmt"

	"github.com/tickwire/tickwire/link/dmaring/nicsim"
)

// The first row of Microsoft's RSS verification table: 66.9.149.187:2794 to
// 161.142.100.80:1766 under the default key.
func ExampleToeplitz() {
	input := []byte{
		66, 9, 149, 187, // source address
		161, 142, 100, 80, // destination address
		0x0a, 0xea, // source port 2794
		0x06, 0xe6, // destination port 1766
	}
	fmt.Printf("IPv4 only:     %#08x\n", nicsim.Toeplitz(nicsim.DefaultRSSKey[:], input[:8]))
	fmt.Printf("IPv4 with TCP: %#08x\n", nicsim.Toeplitz(nicsim.DefaultRSSKey[:], input))
	// Output:
	// IPv4 only:     0x323e8fc2
	// IPv4 with TCP: 0x51ccc178
}

// The second row of Microsoft's table as a TCP frame, and an ARP frame.
func ExampleRSS_Classify() {
	// Four RX queues, the default key and indirection table (entry i is
	// queue i mod 4).
	rss, err := nicsim.NewRSS(nicsim.RSSConfig{Queues: 4})
	if err != nil {
		panic(err)
	}
	frame := []byte{
		0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00, // Ethernet, IPv4
		0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0, // IPv4 header, TCP, don't fragment
		199, 92, 111, 2, 65, 69, 140, 83, // source and destination address
		0x37, 0x96, 0x12, 0x83, // TCP source port 14230, destination port 4739
		0, 0, 0, 0, 0, 0, 0, 0, 0x50, 0x10, 0, 0, 0, 0, 0, 0, // rest of the TCP header
	}
	hash, hashType, queue := rss.Classify(frame)
	fmt.Printf("hash %#08x, TCP/IPv4 %v, queue %d\n", hash, hashType == nicsim.HashTypeIPv4|nicsim.HashTypeTCP, queue)

	arp := append(frame[:12:12], 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1)
	hash, hashType, queue = rss.Classify(arp)
	fmt.Printf("ARP: hash %#x, type %d, queue %d\n", hash, hashType, queue)
	// Output:
	// hash 0xc626b0ea, TCP/IPv4 true, queue 2
	// ARP: hash 0x0, type 0, queue 0
}
