package tickwire_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pipe"
)

// net/http over tickwire: an http.Server on a tickwire listener, and an
// http.Client whose Transport dials through a Dialer.
func ExampleDialer() {
	a, b := pipe.New(pipe.Options{})
	client, err := tickwire.New(tickwire.Config{Link: a, Addr: netip.MustParsePrefix("10.0.0.1/24")})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	server, err := tickwire.New(tickwire.Config{Link: b, Addr: netip.MustParsePrefix("10.0.0.2/24")})
	if err != nil {
		panic(err)
	}
	defer server.Close()

	ln, err := server.ListenTCP(8080)
	if err != nil {
		panic(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "last price for %s: 101.25", r.URL.Query().Get("sym"))
	})}
	go srv.Serve(ln)
	defer srv.Close()

	d := &tickwire.Dialer{Stack: client, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("http://10.0.0.2:8080/price?sym=IBM")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Status, string(body))

	// The stack resolves no names.
	_, err = d.Dial("tcp", "exchange.example:443")
	fmt.Println(err)
	// Output:
	// 200 OK last price for IBM: 101.25
	// dial tcp: address exchange.example: tickwire resolves no host names: use an IPv4 address
}

// Per-connection options, named as net.TCPConn names them.
func ExampleTCPConn_SetTOS() {
	a, b := pipe.New(pipe.Options{})
	client, _ := tickwire.New(tickwire.Config{Link: a, Addr: netip.MustParsePrefix("10.0.0.1/24")})
	defer client.Close()
	server, _ := tickwire.New(tickwire.Config{Link: b, Addr: netip.MustParsePrefix("10.0.0.2/24")})
	defer server.Close()
	ln, _ := server.ListenTCP(9000)
	defer ln.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.DialTCP(ctx, netip.MustParseAddrPort("10.0.0.2:9000"))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	for _, err := range []error{
		c.SetTOS(46 << 2), // DSCP EF: expedited forwarding for orders
		c.SetNoDelay(true),
		c.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: time.Second, Count: 3}),
		c.SetLinger(0), // Close resets at once instead of draining
		c.SetWriteBuffer(64 << 10),
	} {
		if err != nil {
			panic(err)
		}
	}
	err = c.SetReadBuffer(1 << 30) // beyond 4 MiB
	fmt.Println(errors.Is(err, syscall.EINVAL))
	// Output: true
}

// A graceful stop: no new connections, the bytes already written delivered,
// then the stack closed.
func ExampleStack_Shutdown() {
	a, b := pipe.New(pipe.Options{})
	client, _ := tickwire.New(tickwire.Config{Link: a, Addr: netip.MustParsePrefix("10.0.0.1/24")})
	defer client.Close()
	server, _ := tickwire.New(tickwire.Config{Link: b, Addr: netip.MustParsePrefix("10.0.0.2/24")})
	ln, _ := server.ListenTCP(9000)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.DialTCP(ctx, netip.MustParseAddrPort("10.0.0.2:9000"))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	sc, err := ln.AcceptContext(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Fprint(sc, "end of day: 1234 fills")

	done := make(chan error, 1)
	go func() { done <- server.Shutdown(ctx) }()
	msg, err := io.ReadAll(c) // the client reads after Shutdown began
	fmt.Printf("%q %v\n", msg, err)
	fmt.Println("shutdown:", <-done)
	_, err = server.ListenTCP(9001)
	fmt.Println(err)
	// Output:
	// "end of day: 1234 fills" <nil>
	// shutdown: <nil>
	// listen tcp 10.0.0.2:9001: use of closed network connection
}
