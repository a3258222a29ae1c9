//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tickwire/tickwire/internal/kerneltest"
)

// TestLiveTAP runs live mode on a TAP device in a namespace and has the
// kernel send lines A and B, each with its own losses, to their groups:
// the output is what the pcap mode gives for the same packets, and the run
// ends by itself at the end of the session.
func TestLiveTAP(t *testing.T) {
	kerneltest.RequireRoot(t)
	ns := kerneltest.NewNetns(t, "twf")
	ns.DisableIPv6(t)
	dev := kerneltest.Name("twf")

	// 150 messages: about 150 frames on the two lines, well within the
	// TAP device's queue, so the kernel drops none of them.
	recs, first := feed(rand.New(rand.NewPCG(7, 8)), 150, 0.15, 0.25, 0, groupB, false)

	pr, pw := io.Pipe()
	var out bytes.Buffer
	code := make(chan int, 1)
	go func() {
		err := ns.Do(func() error {
			code <- run([]string{"-tap", dev, "-addr", "10.207.0.2/24", "-host", "10.207.0.1/24",
				"-line", "A=" + groupA.String(), "-line", "B=" + groupB.String(),
				"-gap-timeout", "2s", "-duration", "2m", "-format", "json"}, &out, pw)
			return nil
		})
		if err != nil {
			code <- -1
		}
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var log syncLog
	for sc.Scan() {
		log.add(sc.Text())
		if strings.Contains(sc.Text(), "ready") {
			break
		}
	}
	go func() {
		for sc.Scan() {
			log.add(sc.Text())
		}
	}()
	ns.MustRun(t, "ip", "route", "add", "224.0.0.0/4", "dev", dev)

	var snd *net.UDPConn
	if err := ns.Do(func() (err error) {
		snd, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 207, 0, 1)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer snd.Close()
	for _, r := range recs {
		if _, err := snd.WriteToUDPAddrPort(r.p, r.dst); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d:\n%s", c, log.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("mcastfeed did not end:\n%s", log.String())
	}
	var got []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		got = append(got, m)
	}
	want := expected(first, func(int) bool { return false })
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v\nstderr:\n%s", got, want, log.String())
	}
}

// syncLog collects lines from one goroutine for another.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s + "\n")
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestIfaceVeth runs -iface on one end of a veth pair, in its own
// namespace, while the kernel in another namespace sends lines A and B to
// their groups; the output is what the pcap mode gives for the packets.
func TestIfaceVeth(t *testing.T) {
	kerneltest.RequireRoot(t)
	rx, tx := kerneltest.NewNetns(t, "twr"), kerneltest.NewNetns(t, "twx")
	rx.DisableIPv6(t)
	tx.DisableIPv6(t)
	rdev, tdev := kerneltest.Name("twr"), kerneltest.Name("twx")
	kerneltest.Veth(t, rx, rdev, tx, tdev)
	rx.MustRun(t, "ip", "addr", "add", "10.208.0.2/24", "dev", rdev)
	rx.MustRun(t, "ip", "link", "set", rdev, "up")
	tx.MustRun(t, "ip", "addr", "add", "10.208.0.1/24", "dev", tdev)
	tx.MustRun(t, "ip", "link", "set", tdev, "up")
	tx.MustRun(t, "ip", "route", "add", "224.0.0.0/4", "dev", tdev)

	recs, first := feed(rand.New(rand.NewPCG(9, 10)), 150, 0.15, 0.25, 0, groupB, false)
	pr, pw := io.Pipe()
	var out bytes.Buffer
	code := make(chan int, 1)
	go func() {
		err := rx.Do(func() error {
			code <- run([]string{"-iface", rdev, "-line", "A=" + groupA.String(), "-line", "B=" + groupB.String(),
				"-gap-timeout", "2s", "-duration", "2m", "-format", "json"}, &out, pw)
			return nil
		})
		if err != nil {
			code <- -1
		}
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var log syncLog
	for sc.Scan() {
		log.add(sc.Text())
		if strings.Contains(sc.Text(), "ready") {
			break
		}
	}
	go func() {
		for sc.Scan() {
			log.add(sc.Text())
		}
	}()
	var snd *net.UDPConn
	if err := tx.Do(func() (err error) {
		snd, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 208, 0, 1)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer snd.Close()
	for _, r := range recs {
		if _, err := snd.WriteToUDPAddrPort(r.p, r.dst); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d:\n%s", c, log.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("mcastfeed did not end:\n%s", log.String())
	}
	var got []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		got = append(got, m)
	}
	want := expected(first, func(int) bool { return false })
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v\nstderr:\n%s", got, want, log.String())
	}
}
