package nicsim_test

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tickwire/tickwire/link/dmaring"
	"github.com/tickwire/tickwire/link/dmaring/nicsim"
	"github.com/tickwire/tickwire/link/frame"
)

// captureWire records what the device transmits.
type captureWire struct {
	mu sync.Mutex
	// +checklocks:mu
	frames [][]byte
	// +checklocks:mu
	times []int64
}

func (w *captureWire) Start(*nicsim.Device) error { return nil }
func (w *captureWire) Close() error               { return nil }
func (w *captureWire) Transmit(f []byte, ts int64) {
	w.mu.Lock()
	w.frames = append(w.frames, append([]byte(nil), f...))
	w.times = append(w.times, ts)
	w.mu.Unlock()
}

func (w *captureWire) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.frames)
}

// waitFor polls cond until it holds or the generous deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func newDeviceEndpoint(t *testing.T, cfg dmaring.Config, wire nicsim.Wire) (*dmaring.Endpoint, *nicsim.Device) {
	t.Helper()
	ep, err := dmaring.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := nicsim.New(nicsim.Config{Region: ep.Region(), Wakeups: ep.Wakeups(), Wire: wire})
	if err != nil {
		ep.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dev.Close()
		ep.Close()
	})
	return ep, dev
}

func ethFrame(n int, b byte) []byte {
	f := make([]byte, n)
	for i := range f {
		f[i] = b ^ byte(i)
	}
	f[12], f[13] = 0x88, 0xb5 // local experimental EtherType: no checksums
	return f
}

// TestFramesBothWaysWithStamps: frames sent on the host come out of the
// wire, frames received reach a reader, both stamped by the device clock
// close to the host's real time.
func TestFramesBothWaysWithStamps(t *testing.T) {
	w := &captureWire{}
	ep, dev := newDeviceEndpoint(t, dmaring.Config{RingLog: 4}, w)
	for i := range 40 { // several laps of a 16-entry ring
		f := ethFrame(60+i, byte(i))
		for ep.Send(0, f) != nil {
			time.Sleep(100 * time.Microsecond) // ring full: the device catches up
		}
	}
	waitFor(t, "40 frames on the wire", func() bool { return w.count() == 40 })
	w.mu.Lock()
	for i, f := range w.frames {
		if !bytes.Equal(f, ethFrame(60+i, byte(i))) {
			t.Fatalf("frame %d differs on the wire", i)
		}
		if d := time.Since(time.Unix(0, w.times[i])); d < 0 || d > time.Minute {
			t.Fatalf("TX stamp %v off the host clock", d)
		}
	}
	w.mu.Unlock()

	q := ep.RxQueue(0)
	batch := frame.NewBatch(8, 2048)
	for i := range 40 {
		want := ethFrame(100+i, byte(i))
		if err := dev.Receive(want, 0); err != nil {
			t.Fatal(err)
		}
		n, err := q.ReadFrames(batch[:1])
		if err != nil || n != 1 || !bytes.Equal(batch[0].Data(), want) {
			t.Fatalf("frame %d: %d, %v", i, n, err)
		}
		if d := time.Since(time.Unix(0, batch[0].Time)); d < 0 || d > time.Minute {
			t.Fatalf("RX stamp %v off the host clock", d)
		}
	}
	// A stamp given to Receive (a replay's capture time) arrives as is.
	at := time.Date(2024, 3, 1, 9, 30, 0, 123456789, time.UTC).UnixNano()
	dev.Receive(ethFrame(64, 1), at)
	if n, _ := q.ReadFrames(batch); n != 1 || batch[0].Time != at {
		t.Fatalf("stamp %d, want %d", batch[0].Time, at)
	}
}

// TestBadQueuesRaiseErrorsOthersServe misconfigures queues and
// descriptors one way after another; each is refused or failed with an
// error the host can read, and queue 0 keeps working throughout.
func TestBadQueuesRaiseErrorsOthersServe(t *testing.T) {
	w := &captureWire{}
	ep, dev := newDeviceEndpoint(t, dmaring.Config{Queues: 3, RingLog: 4}, w)
	r := ep.Region()
	l := r.Layout()
	sent := 0
	check := func(what string, kind dmaring.QueueKind, idx int, code dmaring.ErrCode) {
		t.Helper()
		waitFor(t, what+" error", func() bool {
			return r.Regs(kind, idx).Load(dmaring.RegErrors) > 0
		})
		if code != dmaring.ErrDescLen && code != dmaring.ErrDescAddr {
			var de *dmaring.DeviceError
			if err := r.Regs(kind, idx).Err(idx); !errors.As(err, &de) || de.Code != code {
				t.Fatalf("%s: queue error %v, want %s", what, err, code)
			}
		}
		// Queue 0 still transmits and receives.
		if err := ep.Send(0, ethFrame(70, 1)); err != nil {
			t.Fatalf("%s: send on queue 0: %v", what, err)
		}
		sent++
		waitFor(t, what+": frame on queue 0", func() bool { return w.count() == sent })
		if err := dev.Receive(ethFrame(70, 2), 0); err != nil {
			t.Fatalf("%s: receive on queue 0: %v", what, err)
		}
		batch := frame.NewBatch(16, 2048)
		if n, err := ep.RxQueue(0).ReadFrames(batch); n < 1 || err != nil {
			t.Fatalf("%s: read on queue 0: %d, %v", what, n, err)
		}
	}
	reprogram := func(kind dmaring.QueueKind, idx int, set func(q dmaring.Regs)) {
		q := r.Regs(kind, idx)
		q.Command(dmaring.CmdSetEnable)
		set(q)
		q.Command(dmaring.CmdSetEnable | 1)
		ep.Wakeups().Device.Notify()
	}
	kickTX := func(idx int) {
		ep.Send(idx, ethFrame(60, 9))
	}

	// A TX ring whose base is not 4 KiB aligned.
	reprogram(dmaring.KindTX, 1, func(q dmaring.Regs) { q.SetBase(q.Base() + 64) })
	kickTX(1)
	check("misaligned base", dmaring.KindTX, 1, dmaring.ErrBaseAlign)

	// A log2 size out of range, and a ring outside the ring area.
	reprogram(dmaring.KindTX, 2, func(q dmaring.Regs) { q.Command(dmaring.CmdSetSize | 30) })
	kickTX(2)
	check("log2 size", dmaring.KindTX, 2, dmaring.ErrLogSize)
	r.Regs(dmaring.KindTX, 2).Store(dmaring.RegErrors, 0)
	reprogram(dmaring.KindTX, 2, func(q dmaring.Regs) {
		q.Command(dmaring.CmdSetSize | 4)
		q.SetBase(uint64(l.BufArea))
	})
	kickTX(2)
	check("ring outside", dmaring.KindTX, 2, dmaring.ErrRingOutside)

	// A producer pointer past the ring, on RX queue 2.
	r.Regs(dmaring.KindRX, 2).Store(dmaring.RegHostPtr, 0x7000)
	if err := dev.Receive(ethFrame(64, 3), 0); err != nil {
		t.Fatal(err) // steered to queue 0: unaffected
	}
	ep.RxQueue(0).ReadFrames(frame.NewBatch(4, 2048))
	// RX queue 2 is only looked at when a frame is steered to it; use the
	// TX side for the same check.
	r.Regs(dmaring.KindTX, 1).Store(dmaring.RegErrors, 0)
	reprogram(dmaring.KindTX, 1, func(q dmaring.Regs) {
		q.SetBase(q.Base() - 64)
		q.Store(dmaring.RegHostPtr, 0x7000)
	})
	check("producer pointer", dmaring.KindTX, 1, dmaring.ErrProdPtr)

	// Descriptors: a length beyond the buffer and an address outside the
	// buffer area, written straight into TX ring 0.
	mem := r.Bytes()
	for _, bad := range []struct {
		code dmaring.ErrCode
		len  uint32
		addr uint64
	}{{dmaring.ErrDescLen, uint32(l.BufSize) + 1, uint64(l.BufArea)}, {dmaring.ErrDescAddr, 64, 16}, {dmaring.ErrDescAddr, 64, uint64(l.Size) - 8}, {dmaring.ErrDescLen, 0, uint64(l.BufArea)}} {
		errsBefore := r.Regs(dmaring.KindTX, 0).Load(dmaring.RegErrors)
		q := r.Regs(dmaring.KindTX, 0)
		prod := q.Load(dmaring.RegHostPtr)
		off := int(q.Base()) + int(prod&15)*dmaring.DescSize
		dmaring.PutDesc(mem[off:], 0, bad.len, bad.addr)
		q.Command(dmaring.CmdSetProdPtr | (prod+1)&dmaring.PtrMask)
		ep.Wakeups().Device.Notify() // what the Endpoint does after a doorbell when the device sleeps
		waitFor(t, bad.code.String(), func() bool { return q.Load(dmaring.RegErrors) > errsBefore })
		if got := dmaring.ErrCode(r.Load32(dmaring.HdrDevLastErr)); got != bad.code {
			t.Fatalf("last error %s, want %s", got, bad.code)
		}
	}
	if dev.Stats().Errors < 8 || ep.DeviceErrors() < 8 {
		t.Fatalf("device counted %d errors, header %d", dev.Stats().Errors, ep.DeviceErrors())
	}
	if err := ep.Err(); err == nil {
		t.Fatal("Endpoint.Err reports nothing")
	} else {
		t.Log(err)
	}
}

// TestRegionTooSmall: a device refuses a region whose header claims more
// than there is.
func TestRegionTooSmall(t *testing.T) {
	ep, err := dmaring.New(dmaring.Config{RingLog: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	r := ep.Region()
	r.Store32(dmaring.HdrSizeLo, uint32(r.Layout().Size+dmaring.PageSize))
	if _, err := nicsim.New(nicsim.Config{Region: r}); !errors.Is(err, dmaring.ErrBadRegion) {
		t.Fatalf("err %v, want ErrBadRegion", err)
	}
}

// TestRxQueueErrorReachesReader: an RX queue the device refuses wakes its
// sleeping reader with a *dmaring.DeviceError; once the host programs it
// properly again it serves.
func TestRxQueueErrorReachesReader(t *testing.T) {
	ep, dev := newDeviceEndpoint(t, dmaring.Config{RingLog: 4}, nil)
	r := ep.Region()
	q := ep.RxQueue(0)
	regs := r.Regs(dmaring.KindRX, 0)
	errc := make(chan error, 1)
	batch := frame.NewBatch(4, 2048)
	go func() {
		_, err := q.ReadFrames(batch)
		errc <- err
	}()
	waitFor(t, "reader asleep", func() bool { return r.Regs(dmaring.KindEQ, 0).Load(dmaring.RegArm) == 1 })
	regs.Command(dmaring.CmdSetEnable)
	regs.Command(dmaring.CmdSetSize | 16)
	regs.Command(dmaring.CmdSetEnable | 1)
	if err := dev.Receive(ethFrame(64, 1), 0); !errors.Is(err, nicsim.ErrNotRunning) {
		t.Fatalf("receive on a refused queue: %v", err)
	}
	var de *dmaring.DeviceError
	if err := <-errc; !errors.As(err, &de) || de.Kind != dmaring.KindRX || de.Code != dmaring.ErrLogSize {
		t.Fatalf("reader got %v, want the RX queue's log2 size error", err)
	}
	regs.Command(dmaring.CmdSetEnable)
	regs.Command(dmaring.CmdSetSize | 4)
	regs.Command(dmaring.CmdSetEnable | 1)
	if err := dev.Receive(ethFrame(64, 2), 0); err != nil {
		t.Fatalf("receive after reprogramming: %v", err)
	}
	if n, err := q.ReadFrames(batch); n != 1 || err != nil {
		t.Fatalf("read after reprogramming: %d, %v", n, err)
	}
}
