package tickwire_test

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pipe"
)

// The UDP handler API: the server answers each datagram from a handler that
// runs where the frame is delivered, and the client reads the reply with
// the allocation-free ReadFromUDPAddrPort. Over link/pipe the reply is
// already queued on the client's socket when its write returns.
func ExampleStack_ServeUDP() {
	a, b := pipe.New(pipe.Options{})
	client, err := tickwire.New(tickwire.Config{Link: a, Addr: netip.MustParsePrefix("10.3.0.1/24")})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	server, err := tickwire.New(tickwire.Config{Link: b, Addr: netip.MustParsePrefix("10.3.0.2/24")})
	if err != nil {
		panic(err)
	}
	defer server.Close()

	srv, err := server.ServeUDP(9000, func(c *tickwire.UDPConn, payload []byte, from netip.AddrPort) {
		// payload is valid until the handler returns: the reply copies it.
		c.WriteToUDPAddrPort([]byte(strings.ToUpper(string(payload))), from)
	})
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	c, err := client.ListenUDP(0)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	for _, order := range []string{"buy 100", "sell 50"} {
		if _, err := c.WriteToUDPAddrPort([]byte(order), netip.MustParseAddrPort("10.3.0.2:9000")); err != nil {
			panic(err)
		}
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s from %v\n", buf[:n], from)
	}
	// Output:
	// BUY 100 from 10.3.0.2:9000
	// SELL 50 from 10.3.0.2:9000
}

// A handler timestamps each datagram with the time its link received it:
// here link/pipe's send; link/tap's read, a replay's capture time or a NIC's
// own stamp elsewhere. The wire-to-handler latency is what the handler
// adds to it.
func ExampleUDPConn_RxTime() {
	a, b := pipe.New(pipe.Options{})
	client, err := tickwire.New(tickwire.Config{Link: a, Addr: netip.MustParsePrefix("10.3.0.1/24")})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	server, err := tickwire.New(tickwire.Config{Link: b, Addr: netip.MustParsePrefix("10.3.0.2/24")})
	if err != nil {
		panic(err)
	}
	defer server.Close()

	latency := make(chan time.Duration, 1)
	srv, err := server.ServeUDP(9000, func(c *tickwire.UDPConn, payload []byte, from netip.AddrPort) {
		latency <- time.Since(c.RxTime()) // RxTime allocates nothing
	})
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	c, err := client.DialUDP(netip.MustParseAddrPort("10.3.0.2:9000"))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("tick")); err != nil {
		panic(err)
	}
	d := <-latency
	fmt.Println("stamped on the link, handled within a second:", d >= 0 && d < time.Second)
	// Output:
	// stamped on the link, handled within a second: true
}
