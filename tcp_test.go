package tickwire_test

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"
)

// TestTCPBulkBothWays sends 10 MiB each way at once over one connection and
// checks every byte.
func TestTCPBulkBothWays(t *testing.T) {
	p := newPair(t, nil)
	const size = 10 << 20
	up := randomBytes(size, 1)
	down := randomBytes(size, 2)

	ln, err := p.b.ListenTCP(9000)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	start := time.Now()
	srvErr := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		defer c.Close()
		srvErr <- exchange(c, down, up)
	}()
	c, err := p.a.DialTCP(ctxTimeout(t, 10*time.Second), addrPort(addrB, 9000))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := exchange(c, up, down); err != nil {
		t.Fatalf("client: %v", err)
	}
	if err := <-srvErr; err != nil {
		t.Fatalf("server: %v", err)
	}
	t.Logf("10 MiB each way in %v", time.Since(start))
}

// exchange writes out and reads len(want) bytes concurrently, then compares.
func exchange(c net.Conn, out, want []byte) error {
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(out)
		werr <- err
	}()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if err := <-werr; err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return errMismatch
	}
	return nil
}

var errMismatch = io.ErrShortBuffer

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}
