//go:build linux

package nicsim_test

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/tickwire/tickwire/link/dmaring"
	"github.com/tickwire/tickwire/link/dmaring/nicsim"
	"github.com/tickwire/tickwire/link/frame"
)

// TestSharedRegion runs the device as another process would: on its own
// mapping of the host's /dev/shm file (opened by path), with the futex
// wake-up words of the header instead of the host's eventfds. Frames go
// both ways with both sides sleeping between them, so every wake-up
// crosses the shared words; the host's MAC is read from the header.
func TestSharedRegion(t *testing.T) {
	path := fmt.Sprintf("/dev/shm/tickwire-shared-test-%d", os.Getpid())
	ep, err := dmaring.New(dmaring.Config{Path: path, Shared: true, RingLog: 4, Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := dmaring.OpenRegion(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !bytes.Equal(r.HostMAC(), ep.MAC()) {
		t.Fatalf("header MAC %v, want the host's %v", r.HostMAC(), ep.MAC())
	}
	wake, err := dmaring.RegionWakeups(r)
	if err != nil {
		t.Fatal(err)
	}
	w := &captureWire{}
	dev, err := nicsim.New(nicsim.Config{Region: r, Wakeups: wake, Wire: w})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()

	q := ep.RxQueue(1)
	batch := frame.NewBatch(1, 2048)
	for i := range 40 { // several laps of 16-entry rings
		f := ethFrame(60+i, byte(i))
		for ep.Send(0, f) != nil {
			time.Sleep(100 * time.Microsecond)
		}
		waitFor(t, "the frame on the wire", func() bool { return w.count() == i+1 })
		// The host reader sleeps first: the device's interrupt wakes it.
		got := make(chan error, 1)
		go func() {
			n, err := q.ReadFrames(batch)
			if err == nil && (n != 1 || !bytes.Equal(batch[0].Data(), ethFrame(100+i, byte(i)))) {
				err = fmt.Errorf("frame %d: %d frames or other bytes", i, n)
			}
			got <- err
		}()
		time.Sleep(time.Millisecond)
		if err := dev.ReceiveOn(1, ethFrame(100+i, byte(i)), 0); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("frame %d: the host reader was not woken", i)
		}
	}
}
