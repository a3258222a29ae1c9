//go:build linux && (amd64 || arm64)

package feed_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tickwire/tickwire/feed"
	"github.com/tickwire/tickwire/internal/capgen"
	"github.com/tickwire/tickwire/internal/kerneltest"
	"github.com/tickwire/tickwire/link/afxdp"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/pcap"
)

// runFeed decodes src to its end into a new recorder. It may run on
// another goroutine than the test's.
func runFeed(t *testing.T, src frame.Source) (*recorder, feed.Stats, error) {
	rec := newRecorder(t)
	d, err := feed.New(feed.Config{History: true}, rec)
	if err != nil {
		return nil, feed.Stats{}, err
	}
	err = d.Run(context.Background(), src)
	d.Close()
	return rec, d.Stats(), err
}

// TestLiveAFXDPMatchesFile replays a generated feed into one end of a veth
// pair (an AF_PACKET socket writing each frame of the pcap, in order) and
// captures it on the other end with an afxdp.Source filtered on the feed's
// server port: the live capture decodes to exactly the records, TCP gaps
// and sequence gaps of the same pcap read from its file.
func TestLiveAFXDPMatchesFile(t *testing.T) {
	kerneltest.RequireRoot(t)
	f, err := capgen.Generate(capgen.Options{Messages: 1500, Seed: 12, Flows: 3, Impair: impaired})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "feed.pcap")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.WritePcap(out); err != nil {
		t.Fatal(err)
	}
	out.Close()
	file, err := pcap.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	fromFile, _, err := runFeed(t, file)
	file.Close()
	if err != nil {
		t.Fatal(err)
	}

	ns := kerneltest.NewNetns(t, "twf")
	ns.DisableIPv6(t)
	capDev, sendDev := kerneltest.Name("twf"), kerneltest.Name("twf")
	kerneltest.Veth(t, ns, capDev, ns, sendDev)
	var src *afxdp.Source
	if err := ns.Do(func() (err error) {
		src, err = afxdp.NewSource(capDev, afxdp.Config{Filter: afxdp.Filter{Port: f.Flows[0].Server.Port}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer src.Close()

	var fd int
	var sa unix.SockaddrLinklayer
	if err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(sendDev)
		if err != nil {
			return err
		}
		sa.Ifindex = ifi.Index
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)

	type result struct {
		rec *recorder
		st  feed.Stats
		err error
	}
	done := make(chan result, 1)
	go func() {
		rec, st, err := runFeed(t, src)
		done <- result{rec, st, err}
	}()
	for i, fr := range f.Frames {
		if err := unix.Sendto(fd, fr.Data, 0, &sa); err != nil {
			t.Fatalf("sending frame %d: %v", i, err)
		}
	}
	// Every frame is in the capture once the source counted it; a loaded
	// machine may take a while.
	deadline := time.Now().Add(60 * time.Second)
	for src.Stats().RxFrames < uint64(len(f.Frames)) {
		if time.Now().After(deadline) {
			t.Fatalf("captured %d of %d frames: %+v", src.Stats().RxFrames, len(f.Frames), src.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	src.Close()
	live := <-done
	if live.err != nil {
		t.Fatal(live.err)
	}
	st := src.Stats()
	t.Logf("source: %+v; mode %v, zero-copy %v", st, src.AttachMode(), src.ZeroCopy())
	if st.RxFrames != uint64(len(f.Frames)) || st.KernelDrops != 0 || st.RxTruncated != 0 || st.RxInvalid != 0 {
		t.Errorf("source stats %+v, want exactly %d frames and no drops", st, len(f.Frames))
	}
	if !reflect.DeepEqual(live.rec.flows, fromFile.flows) {
		for k, want := range fromFile.flows {
			got := live.rec.flows[k]
			if got == nil {
				t.Errorf("flow %s: not seen live", k)
				continue
			}
			t.Errorf("flow %s: live %d trades %d orders %d TCP gaps %d sequence gaps, file %d %d %d %d", k,
				len(got.trades), len(got.orders), len(got.tcpGaps), len(got.seqGaps),
				len(want.trades), len(want.orders), len(want.tcpGaps), len(want.seqGaps))
		}
	}
	checkTruth(t, f, live.rec, live.st)
}
