package tickwire_test

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pipe"
)

// A feed handler joins the two groups of a market-data feed's lines A and
// B, on one port, and tells them apart with RxGroup; the publisher sends
// to both groups. Over link/pipe each datagram is handled before the
// publisher's write returns.
func ExampleUDPConn_JoinGroup() {
	a, b := pipe.New(pipe.Options{})
	publisher, err := tickwire.New(tickwire.Config{Link: a, Addr: netip.MustParsePrefix("10.4.0.1/24")})
	if err != nil {
		panic(err)
	}
	defer publisher.Close()
	subscriber, err := tickwire.New(tickwire.Config{Link: b, Addr: netip.MustParsePrefix("10.4.0.2/24")})
	if err != nil {
		panic(err)
	}
	defer subscriber.Close()

	lineA, lineB := netip.MustParseAddr("239.10.0.1"), netip.MustParseAddr("239.10.0.2")
	got := make(chan string, 4)
	feed, err := subscriber.ServeUDP(5000, func(c *tickwire.UDPConn, payload []byte, from netip.AddrPort) {
		got <- fmt.Sprintf("%s on %v", payload, c.RxGroup())
	})
	if err != nil {
		panic(err)
	}
	defer feed.Close()
	for _, g := range []netip.Addr{lineA, lineB} {
		if err := feed.JoinGroup(g); err != nil { // sends an IGMP report
			panic(err)
		}
	}

	pub, err := publisher.ListenUDP(0)
	if err != nil {
		panic(err)
	}
	defer pub.Close()
	pub.SetMulticastTTL(2) // the default, 1, keeps datagrams on the link
	for _, g := range []netip.Addr{lineA, lineB} {
		if _, err := pub.WriteToUDPAddrPort([]byte("seq 1"), netip.AddrPortFrom(g, 5000)); err != nil {
			panic(err)
		}
		select {
		case m := <-got:
			fmt.Println(m)
		case <-time.After(5 * time.Second):
			fmt.Println("nothing received")
		}
	}
	// Output:
	// seq 1 on 239.10.0.1
	// seq 1 on 239.10.0.2
}
