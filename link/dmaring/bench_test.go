package dmaring

import (
	"testing"

	"github.com/tickwire/tickwire/link/frame"
)

// BenchmarkRxQueue measures the host consuming a pre-filled RX ring (4096
// frames written by the in-test device while the timer is stopped):
// completions read, frames copied (ReadFrames) or borrowed, ring refilled.
func BenchmarkRxQueue(b *testing.B) {
	for _, size := range []int{64, 1408} {
		for _, mode := range []string{"copy", "borrow"} {
			b.Run(mode+"/"+itoa(size), func(b *testing.B) {
				benchRx(b, size, mode == "borrow")
			})
		}
	}
}

func itoa(n int) string {
	if n == 64 {
		return "64B"
	}
	return "1408B"
}

func benchRx(b *testing.B, size int, borrow bool) {
	e, err := New(Config{InMemory: true, RingLog: 12})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	d := newFakeDevice(b, e)
	q := e.RxQueue(0)
	f := testFrame(size, 1)
	batch := frame.NewBatch(64, 2048)
	borrowed := make([]frame.Frame, 64)
	b.ReportAllocs()
	b.SetBytes(int64(size))
	b.ResetTimer()
	for done := 0; done < b.N; {
		b.StopTimer()
		fill := min(b.N-done, 4096)
		for range fill {
			d.put(0, f, nil)
		}
		b.StartTimer()
		for got := 0; got < fill; {
			var n int
			if borrow {
				n, _ = q.BorrowFrames(borrowed)
				q.ReleaseBorrowed()
			} else {
				n, _ = q.ReadFrames(batch)
			}
			got += n
		}
		done += fill
	}
}
