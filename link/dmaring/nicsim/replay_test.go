package nicsim_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/tickwire/tickwire/link/dmaring"
	"github.com/tickwire/tickwire/link/dmaring/nicsim"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/pcap"
)

// writeCapture writes frames of 60 bytes at the given capture times.
func writeCapture(t *testing.T, times []int64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pcap.NewWriter(f, layers.LinkTypeEthernet, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for i, ts := range times {
		b := make([]byte, 60)
		b[14] = byte(i)
		w.WriteFrame(ts, b, 0)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return path
}

// TestReplayPaced: at recorded pace, frames 40 ms apart in the capture
// reach the ring no sooner than their schedule says (on the device clock),
// and the replay takes at least the capture's span.
func TestReplayPaced(t *testing.T) {
	const gap = 40 * time.Millisecond
	base := time.Date(2024, 1, 2, 9, 30, 0, 0, time.UTC).UnixNano()
	path := writeCapture(t, []int64{base, base + int64(gap), base + 2*int64(gap), base + 3*int64(gap)})
	ep, err := dmaring.New(dmaring.Config{InMemory: true, RingLog: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	src, err := pcap.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	replay := nicsim.NewReplay(src, nicsim.ReplayConfig{Paced: true})
	start := time.Now()
	dev, err := nicsim.New(nicsim.Config{Region: ep.Region(), Wakeups: ep.Wakeups(), Wire: replay})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	select {
	case <-replay.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("replay did not finish")
	}
	if took := time.Since(start); took < 3*gap {
		t.Fatalf("paced replay of a %v capture took %v", 3*gap, took)
	}
	batch := frame.NewBatch(8, 2048)
	n, err := ep.RxQueue(0).ReadFrames(batch)
	if err != nil || n != 4 {
		t.Fatalf("%d frames, %v", n, err)
	}
	// The schedule is absolute (frame i is due i*gap after the first was
	// put on the ring, which was after start), so a late frame does not
	// delay the next: each frame's stamp is at or after its due time.
	for i := range n {
		if due := start.Add(time.Duration(i) * gap).UnixNano(); batch[i].Time < due {
			t.Errorf("frame %d stamped %v before it was due", i, time.Duration(due-batch[i].Time))
		}
		if batch[i].Data()[14] != byte(i) {
			t.Errorf("frame %d out of order", i)
		}
	}
	// Device-clock stamps (not capture times): near the host's clock now.
	if d := time.Since(time.Unix(0, batch[0].Time)); d < 0 || d > time.Minute {
		t.Errorf("stamp %v from now", d)
	}
}
