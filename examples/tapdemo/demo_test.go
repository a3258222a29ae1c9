package main

import (
	"bytes"
	"context"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pipe"
)

// TestServeOverPipe checks the demo's services with a second tickwire stack
// as the client, over an in-process pipe: no root needed.
func TestServeOverPipe(t *testing.T) {
	a, b := pipe.New(pipe.Options{})
	server, err := tickwire.New(tickwire.Config{Link: a, Addr: netip.MustParsePrefix("10.201.0.2/24")})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	client, err := tickwire.New(tickwire.Config{Link: b, Addr: netip.MustParsePrefix("10.201.0.1/24")})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, server, func() { close(ready) }) }()
	<-ready

	dst := netip.MustParseAddr("10.201.0.2")
	if _, err := client.Ping(ctx, dst); err != nil {
		t.Fatalf("ping: %v", err)
	}
	c, err := client.DialTCP(ctx, netip.AddrPortFrom(dst, EchoPort))
	if err != nil {
		t.Fatal(err)
	}
	msg := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	go c.Write(msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("TCP echo: %v", err)
	}
	// A connection still open when Serve stops is closed by it.
	d, err := client.DialTCP(ctx, netip.AddrPortFrom(dst, DiscardPort))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Write(msg); err != nil {
		t.Fatal(err)
	}
	u, err := client.DialUDP(netip.AddrPortFrom(dst, EchoPort))
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	u.Write([]byte("datagram"))
	u.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	if n, err := u.Read(buf); err != nil || string(buf[:n]) != "datagram" {
		t.Fatalf("UDP echo: %q %v", buf[:n], err)
	}

	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	d.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := d.Read(buf); err == nil {
		t.Fatal("discard connection still open after Serve returned")
	}
	c.Close()
	d.Close()
}
