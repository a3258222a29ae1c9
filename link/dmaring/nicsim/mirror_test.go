package nicsim_test

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tickwire/tickwire/internal/shareddata"
	"github.com/tickwire/tickwire/link/dmaring"
	"github.com/tickwire/tickwire/link/dmaring/nicsim"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/pcap"
	"github.com/tickwire/tickwire/mirror"
)

// eventLog writes down every call an Assembler makes, bytes included.
type eventLog struct{ b strings.Builder }

func (l *eventLog) FlowStart(k mirror.FlowKey, ts int64) { fmt.Fprintf(&l.b, "start %v %d\n", k, ts) }
func (l *eventLog) Data(k mirror.FlowKey, off uint64, d []byte, ts int64) {
	fmt.Fprintf(&l.b, "data %v %d %x %d\n", k, off, d, ts)
}
func (l *eventLog) Gap(k mirror.FlowKey, off, n uint64, ts int64) {
	fmt.Fprintf(&l.b, "gap %v %d %d %d\n", k, off, n, ts)
}
func (l *eventLog) FlowEnd(k mirror.FlowKey, r mirror.EndReason, ts int64) {
	fmt.Fprintf(&l.b, "end %v %v %d\n", k, r, ts)
}

// TestMirrorFromRingMatchesFile feeds each shared capture to the mirror
// reassembler twice: straight from the file, and replayed by the device
// into an RX ring (capture times kept, no loss) and read with the borrow
// path. The bytes, gaps, starts and ends must be the same.
func TestMirrorFromRingMatchesFile(t *testing.T) {
	dir := shareddata.Path(t, "captures")
	files, _ := filepath.Glob(filepath.Join(dir, "*.pcap"))
	if len(files) == 0 {
		t.Skip("no captures in " + dir)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			direct := &eventLog{}
			a, err := mirror.New(mirror.Config{}, direct)
			if err != nil {
				t.Fatal(err)
			}
			src, err := pcap.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			batch := frame.NewBatch(64, 65535)
			frames := 0
			for {
				n, err := src.ReadFrames(batch)
				for _, f := range batch[:n] {
					a.HandleLinkFrame(f.LinkType, f.Data(), f.Time)
					frames++
				}
				if err != nil {
					if !errors.Is(err, io.EOF) {
						t.Fatal(err)
					}
					break
				}
			}
			src.Close()
			a.Close()

			ring := &eventLog{}
			b, _ := mirror.New(mirror.Config{}, ring)
			got := fromRing(t, path, b)
			b.Close()
			if got != frames {
				t.Fatalf("ring delivered %d frames, file has %d", got, frames)
			}
			if direct.b.String() != ring.b.String() {
				t.Fatalf("mirror output differs:\nfile:\n%.2000s\nring:\n%.2000s", direct.b.String(), ring.b.String())
			}
			if frames > 0 && direct.b.Len() == 0 {
				t.Fatal("mirror reported nothing")
			}
		})
	}
}

// fromRing replays path through a device into a one-queue endpoint and
// hands every frame borrowed from the RX ring to a; it returns the frames.
func fromRing(t *testing.T, path string, a *mirror.Assembler) int {
	ep, err := dmaring.New(dmaring.Config{RingLog: 6, BufSize: dmaring.MaxBufSize, MTU: 9000})
	if err != nil {
		t.Fatal(err)
	}
	src, err := pcap.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	replay := nicsim.NewReplay(src, nicsim.ReplayConfig{CaptureTime: true, Lossless: true})
	dev, err := nicsim.New(nicsim.Config{Region: ep.Region(), Wakeups: ep.Wakeups(), Wire: replay})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	read := make(chan int, 1024)
	q := ep.RxQueue(0)
	go func() {
		frames := make([]frame.Frame, 32)
		total := 0
		for {
			n, err := q.BorrowFrames(frames)
			for _, f := range frames[:n] {
				a.HandleLinkFrame(f.LinkType, f.Data(), f.Time)
			}
			q.ReleaseBorrowed()
			total += n
			select {
			case read <- total:
			default:
			}
			if err != nil {
				done <- result{total, err}
				return
			}
		}
	}()
	select {
	case <-replay.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("replay did not finish")
	}
	if err := replay.Err(); err != nil {
		t.Fatal(err)
	}
	want, dropped := replay.Counts()
	if dropped != 0 {
		t.Fatalf("replay dropped %d frames", dropped)
	}
	deadline := time.After(60 * time.Second)
	for n := 0; n < int(want); {
		select {
		case n = <-read:
		case <-deadline:
			t.Fatalf("read %d of %d frames", n, want)
		}
	}
	dev.Close()
	ep.Close()
	r := <-done
	if !errors.Is(r.err, io.EOF) {
		t.Fatalf("reader ended with %v", r.err)
	}
	return r.n
}
