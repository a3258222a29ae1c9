package tickwire_test

import (
	"io"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tickwire/tickwire"
)

// TestLockOSThread: with Config.LockOSThread, an OnReceive handler (stock
// mode: it runs on its connection's goroutine) always runs on the same OS
// thread, while the program's goroutines come and go on the others.
func TestLockOSThread(t *testing.T) {
	if suiteLatency {
		t.Skip("in latency mode, over link/pipe, the handler runs on the client's writing goroutine")
	}
	threads := func(lock bool) int {
		p := newPair(t, func(c *tickwire.Config) { c.LockOSThread = lock })
		var mu sync.Mutex
		tids := map[int]bool{}
		ln, err := p.b.ServeTCP(7, func(c *tickwire.TCPConn, data []byte, err error) {
			if err != nil {
				c.Close()
				return
			}
			mu.Lock()
			tids[unix.Gettid()] = true
			mu.Unlock()
			c.Write(data)
		})
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		c := p.dialTo(t, 7)
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Minute))
		buf := make([]byte, 1)
		var wg sync.WaitGroup
		for i := range 300 {
			if i%10 == 0 { // churn: goroutines that block in system calls move threads around
				wg.Add(1)
				go func() {
					defer wg.Done()
					time.Sleep(time.Millisecond)
				}()
			}
			if _, err := c.Write(buf); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, buf); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return len(tids)
	}
	unlocked, locked := threads(false), threads(true)
	t.Logf("300 handler calls ran on %d threads unlocked, %d locked", unlocked, locked)
	if locked != 1 {
		t.Errorf("with LockOSThread, the handler ran on %d threads, want 1", locked)
	}
}
