package tickwire_test

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pipe"
)

// Two stacks joined by an in-process pipe: one serves TCP echo on port 7,
// the other dials it.
func Example() {
	a, b := pipe.New(pipe.Options{})
	client, err := tickwire.New(tickwire.Config{Link: a, MAC: a.MAC(), Addr: netip.MustParsePrefix("10.0.0.1/24")})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	server, err := tickwire.New(tickwire.Config{Link: b, MAC: b.MAC(), Addr: netip.MustParsePrefix("10.0.0.2/24")})
	if err != nil {
		panic(err)
	}
	defer server.Close()

	ln, err := server.ListenTCP(7)
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.DialTCP(ctx, netip.MustParseAddrPort("10.0.0.2:7"))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	fmt.Fprint(c, "hello, wire")
	buf := make([]byte, 11)
	if _, err := io.ReadFull(c, buf); err != nil {
		panic(err)
	}
	fmt.Println(string(buf))
	fmt.Println("connections open on the server:", server.Stats().ConnsOpen)
	// Output:
	// hello, wire
	// connections open on the server: 1
}

// A stack answers ICMP echo by itself; Ping measures the round trip.
func ExampleStack_Ping() {
	a, b := pipe.New(pipe.Options{})
	s1, _ := tickwire.New(tickwire.Config{Link: a, Addr: netip.MustParsePrefix("192.168.7.1/24")})
	defer s1.Close()
	s2, _ := tickwire.New(tickwire.Config{Link: b, Addr: netip.MustParsePrefix("192.168.7.2/24")})
	defer s2.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s1.Ping(ctx, netip.MustParseAddr("192.168.7.2")); err != nil {
		panic(err)
	}
	// The replier counts its reply after sending it, so read the count on
	// the side that waited for it.
	fmt.Println("echo replies received:", s1.Stats().ICMPEchoRepliesRx)
	// Output: echo replies received: 1
}

// UDP: any port can listen.
func ExampleStack_ListenUDP() {
	a, b := pipe.New(pipe.Options{})
	s1, _ := tickwire.New(tickwire.Config{Link: a, Addr: netip.MustParsePrefix("10.1.0.1/24")})
	defer s1.Close()
	s2, _ := tickwire.New(tickwire.Config{Link: b, Addr: netip.MustParsePrefix("10.1.0.2/24")})
	defer s2.Close()

	pc, _ := s2.ListenUDP(65000)
	defer pc.Close()
	c, _ := s1.DialUDP(netip.MustParseAddrPort("10.1.0.2:65000"))
	defer c.Close()
	c.Write([]byte("tick"))
	buf := make([]byte, 64)
	pc.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, from, err := pc.ReadFrom(buf)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s from %v\n", buf[:n], from.(interface{ String() string }).String()[:8])
	// Output: tick from 10.1.0.1
}

// Latency mode with the handler API: the server answers each request from an
// OnReceive handler that runs where the segment is processed, and the client
// takes the reply in its own handler. Over link/pipe the whole round trip
// runs on the client's goroutine, inside its Write.
func ExampleStack_ServeTCP() {
	a, b := pipe.New(pipe.Options{})
	client, err := tickwire.New(tickwire.Config{Link: a, Addr: netip.MustParsePrefix("10.2.0.1/24"), Latency: true})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	server, err := tickwire.New(tickwire.Config{Link: b, Addr: netip.MustParsePrefix("10.2.0.2/24"), Latency: true})
	if err != nil {
		panic(err)
	}
	defer server.Close()

	ln, err := server.ServeTCP(7, func(c *tickwire.TCPConn, request []byte, err error) {
		if err != nil { // io.EOF: the client is done
			c.Close()
			return
		}
		c.Write(append([]byte("ack "), request...)) // data is valid until the handler returns
	})
	if err != nil {
		panic(err)
	}
	defer ln.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.DialTCP(ctx, netip.MustParseAddrPort("10.2.0.2:7"))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	replies := make(chan string, 1)
	c.OnReceive(func(_ *tickwire.TCPConn, reply []byte, err error) {
		if err == nil {
			replies <- string(reply) // copied: reply is reused after the call
		}
	})
	c.Write([]byte("order 42"))
	fmt.Println(<-replies)
	// Output:
	// ack order 42
}

// AcceptTCP returns the concrete *TCPConn, so that a server reaches the
// handler API and the half-close methods without a type assertion.
func ExampleTCPListener_AcceptTCP() {
	a, b := pipe.New(pipe.Options{})
	client, _ := tickwire.New(tickwire.Config{Link: a, Addr: netip.MustParsePrefix("10.4.0.1/24")})
	defer client.Close()
	server, _ := tickwire.New(tickwire.Config{Link: b, Addr: netip.MustParsePrefix("10.4.0.2/24")})
	defer server.Close()

	ln, err := server.ListenTCP(7)
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.AcceptTCP()
		if err != nil {
			return
		}
		c.Write([]byte("bye"))
		c.CloseWrite() // FIN: the client reads to io.EOF
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.DialTCP(ctx, netip.MustParseAddrPort("10.4.0.2:7"))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	got, err := io.ReadAll(c)
	fmt.Printf("%q %v\n", got, err)
	// Output:
	// "bye" <nil>
}
