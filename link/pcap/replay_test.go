package pcap

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/tickwire/tickwire/link/frame"
)

type collector struct {
	frames [][]byte
	reject int // reject frames shorter than this
	fail   error
	// injected, when not nil, receives a value after each frame kept.
	injected chan struct{}
}

func (c *collector) InjectFrame(b []byte) error {
	if c.fail != nil {
		return c.fail
	}
	if len(b) < c.reject {
		return errors.New("short")
	}
	c.frames = append(c.frames, append([]byte(nil), b...))
	if c.injected != nil {
		c.injected <- struct{}{}
	}
	return nil
}

func openFrames(t *testing.T, frames []testFrame) *Reader {
	t.Helper()
	r, err := NewReader(bytes.NewReader(encodeClassic(frames, binary.LittleEndian, true)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestReplayAllFramesInOrder(t *testing.T) {
	want := makeFrames(100)
	var reports []ReplayResult
	p := &Replayer{Batch: 7, ProgressEvery: 30, Progress: func(r ReplayResult) { reports = append(reports, r) }}
	c := &collector{}
	res, err := p.Replay(context.Background(), openFrames(t, want), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Frames != 100 || len(c.frames) != 100 {
		t.Fatalf("replayed %d (%d received), want 100", res.Frames, len(c.frames))
	}
	var bytesWant int64
	for i := range want {
		bytesWant += int64(len(want[i].data))
		if !bytes.Equal(c.frames[i], want[i].data) {
			t.Fatalf("frame %d differs", i)
		}
	}
	if res.Bytes != bytesWant {
		t.Fatalf("bytes %d, want %d", res.Bytes, bytesWant)
	}
	// Reports at 30, 60, 90 and the final one.
	if len(reports) != 4 || reports[0].Frames != 30 || reports[3].Frames != 100 {
		t.Fatalf("progress reports %+v", reports)
	}
}

func TestReplayCountTruncatedRejected(t *testing.T) {
	want := makeFrames(50)
	c := &collector{reject: 100}
	res, err := (&Replayer{Count: 20, FrameSize: 1000}).Replay(context.Background(), openFrames(t, want), c)
	if err != nil {
		t.Fatal(err)
	}
	var trunc, rej int64
	for _, f := range want[:20] {
		switch {
		case len(f.data) > 1000:
			trunc++
		case len(f.data) < 100:
			rej++
		}
	}
	if res.Frames+res.Truncated+res.Rejected != 20 || res.Truncated != trunc || res.Rejected != rej {
		t.Fatalf("result %+v, want 20 frames of which %d truncated, %d rejected", res, trunc, rej)
	}
}

func TestReplayStopsWhenNotAttached(t *testing.T) {
	_, err := (&Replayer{}).Replay(context.Background(), openFrames(t, makeFrames(3)), &collector{fail: ErrNotAttached})
	if !errors.Is(err, ErrNotAttached) {
		t.Fatalf("err %v", err)
	}
}

func TestReplayRecordedPaceAndCancel(t *testing.T) {
	frames := makeFrames(5)
	for i := range frames {
		frames[i].ts = 1e18 + int64(i)*10e6 // 10 ms apart: 40 ms in all
	}
	start := time.Now()
	res, err := (&Replayer{Speed: 1}).Replay(context.Background(), openFrames(t, frames), &collector{})
	if err != nil || res.Frames != 5 {
		t.Fatalf("%+v %v", res, err)
	}
	// A timer never fires early, so this lower bound cannot flake.
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Fatalf("paced replay took %v, want at least 40ms", d)
	}
	// Twice as fast halves the span; the lower bound is 20 ms.
	start = time.Now()
	if _, err := (&Replayer{Speed: 2}).Replay(context.Background(), openFrames(t, frames), &collector{}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("speed 2 took %v, want at least 20ms", d)
	}

	// Frames an hour apart: cancellation ends the wait.
	frames[1].ts = frames[0].ts + int64(time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	c := &collector{injected: make(chan struct{}, len(frames))}
	done := make(chan error, 1)
	go func() {
		_, err := (&Replayer{Speed: 1}).Replay(ctx, openFrames(t, frames[:2]), c)
		done <- err
	}()
	// Cancel once the first frame is in and the replay waits for the
	// second (a fixed sleep raced with a loaded machine).
	select {
	case <-c.injected:
	case <-time.After(10 * time.Second):
		t.Fatal("the first frame was not replayed within 10 s")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if len(c.frames) != 1 {
		t.Fatalf("%d frames before cancel, want 1", len(c.frames))
	}
	if _, err := (&Replayer{Speed: -1}).Replay(context.Background(), openFrames(t, frames), c); err == nil {
		t.Fatal("negative speed accepted")
	}
}

// TestReplayRefusesOtherLinkTypes: frames that are not Ethernet are not
// injected into a link; the replay stops with an error naming their type.
func TestReplayRefusesOtherLinkTypes(t *testing.T) {
	r, err := NewReader(bytes.NewReader(classicWithLink(makeFrames(3), layers.LinkTypeLinuxSLL)))
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{}
	res, err := (&Replayer{}).Replay(context.Background(), r, c)
	var le *LinkTypeError
	if !errors.As(err, &le) || le.LinkType != frame.LinkTypeLinuxSLL || res.Frames != 0 {
		t.Fatalf("result %+v err %v, want nothing injected and a LinkTypeError", res, err)
	}
	t.Log(err)
}
