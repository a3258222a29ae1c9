package kerneltest

import (
	"io"
	"sync"
	"testing"

	"github.com/tickwire/tickwire"
)

// ServeEcho makes s serve TCP and UDP echo on port until the test ends;
// then it closes the listeners and s (which ends connections still
// echoing) and waits for its goroutines.
func ServeEcho(tb testing.TB, s *tickwire.Stack, port uint16) {
	tb.Helper()
	ln, err := s.ListenTCP(port)
	if err != nil {
		tb.Fatal(err)
	}
	pc, err := s.ListenUDP(port)
	if err != nil {
		ln.Close()
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	go func() {
		defer wg.Done()
		buf := make([]byte, 65536)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(buf[:n], from)
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		pc.Close()
		s.Close()
		wg.Wait()
	})
}
