package tickwire_test

import (
	"io"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
)

// sendBufferCase is a send-buffer auto-tuning setting and the largest
// buffer it allows; fixed calls SetWriteBuffer(fixed) before writing.
type sendBufferCase struct {
	name  string
	max   int // Config.SendBufferMax
	fixed int
	bound int
}

var sendBufferCases = []sendBufferCase{
	{"default", 0, 0, tickwire.DefaultSendBufferMax},
	{"256KiB", 256 << 10, 0, 256 << 10},
	{"off", -1, 0, tickwire.DefaultSendBuffer},
	{"SetWriteBuffer", 0, 64 << 10, 64 << 10},
}

// checkSendBufferGrowth writes 64 MiB on c, whose peer reads and discards,
// and checks TCPInfo.SendBuffer against tc before and after. How far the
// buffer grows depends on the congestion window the stream reaches, so
// only growth is asserted.
func checkSendBufferGrowth(t *testing.T, c *tickwire.TCPConn, tc sendBufferCase) {
	t.Helper()
	start := tickwire.DefaultSendBuffer
	if tc.fixed != 0 {
		if err := c.SetWriteBuffer(tc.fixed); err != nil {
			t.Fatal(err)
		}
		start = tc.fixed
	}
	if got := c.Info().SendBuffer; got != start {
		t.Errorf("SendBuffer before writing = %d, want %d", got, start)
	}
	c.SetWriteDeadline(time.Now().Add(60 * time.Second))
	buf := make([]byte, 64<<10)
	for range 1024 {
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	checkGrowth(t, "SendBuffer", c.Info().SendBuffer, start, tc.bound)
}

// checkGrowth checks what, an auto-tuned buffer that started at start and
// may grow up to bound, after a 64 MiB stream: within the bound, grown
// when the bound allows it, unchanged when it does not.
func checkGrowth(t *testing.T, what string, got, start, bound int) {
	t.Helper()
	t.Logf("%s after 64 MiB: %d", what, got)
	switch {
	case got > bound:
		t.Errorf("%s after 64 MiB = %d, above the bound %d", what, got, bound)
	case bound > start && got <= start:
		t.Errorf("%s after 64 MiB = %d: did not grow", what, got)
	case bound == start && got != start:
		t.Errorf("%s after 64 MiB = %d with growth off, want %d", what, got, start)
	}
}

// TestSendBufferGrows is TestSendBufferGrowsTAP between two stacks over
// link/pipe, the reader a goroutine in Read.
func TestSendBufferGrows(t *testing.T) {
	for _, tc := range sendBufferCases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, func(c *tickwire.Config) { c.SendBufferMax = tc.max })
			ln, err := p.b.ListenTCP(9)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				a, err := ln.Accept()
				if err != nil {
					return
				}
				io.Copy(io.Discard, a)
				a.Close()
			}()
			c, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, 9))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			checkSendBufferGrowth(t, c, tc)
		})
	}
}
