package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"strings"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/examples/internal/tapstack"
	"github.com/tickwire/tickwire/rdma"
)

// MaxRegion bounds -mr-size and -rlen.
const MaxRegion = 1 << 30

// Options are the demo's flags.
type Options struct {
	Node    tapstack.Options
	MRSize  int
	PeerQPN uint
	PeerPSN uint
	PathMTU int
	Recv    int
	PSN     int // own first send PSN; -1 for a random one

	Requester bool
	Peer      string
	RKey      uint
	RAddr     uint64
	RLen      int
}

// RegisterFlags binds the demo's own flags.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.MRSize, "mr-size", 65536, "bytes of the memory region (1 to 2^30)")
	fs.UintVar(&o.PeerQPN, "peer-qpn", 17, "the peer's queue pair number")
	fs.UintVar(&o.PeerPSN, "peer-psn", 0, "the first PSN the peer sends")
	fs.IntVar(&o.PathMTU, "path-mtu", 1024, "path MTU: 256, 512, 1024 (2048, 4096 with a larger -mtu)")
	fs.IntVar(&o.Recv, "recv", 0, "receive buffers of path-MTU bytes posted for SENDs")
	fs.IntVar(&o.PSN, "psn", -1, "own first send PSN (default random)")
	fs.BoolVar(&o.Requester, "requester", false, "drive the rdmademo responder at -peer instead of answering")
	fs.StringVar(&o.Peer, "peer", "", "the peer's IPv4 address (default: the -host address; required with -requester)")
	fs.UintVar(&o.RKey, "rkey", 0, "requester: the responder's rkey")
	fs.Uint64Var(&o.RAddr, "raddr", 0, "requester: the responder's region address")
	fs.IntVar(&o.RLen, "rlen", 0, "requester: the responder's region length")
}

// Run runs the responder (or with -requester the requester) until ctx is
// done (the requester: until it has finished), then writes the exit report
// to out.
func Run(ctx context.Context, o Options, out io.Writer) error {
	if o.PeerQPN > rdma.PSNMask || o.PeerPSN > rdma.PSNMask || o.PSN > rdma.PSNMask {
		return errors.New("-peer-qpn, -peer-psn and -psn are 24-bit numbers")
	}
	psn := uint32(o.PSN)
	if o.PSN < 0 {
		psn = rand.Uint32() & rdma.PSNMask
	}
	cfg := tickwire.Config{}
	if o.Node.Host.IsValid() {
		cfg.Gateway = o.Node.Host.Addr()
	}
	n, err := tapstack.Open(o.Node, cfg)
	if err != nil {
		return err
	}
	dev, err := rdma.Open(n.Stack)
	if err == nil {
		if o.Requester {
			err = request(ctx, o, psn, dev, out)
		} else {
			err = respond(ctx, o, psn, dev, out)
		}
		printStats(out, dev.Stats())
		dev.Close()
	}
	if cerr := n.Close(out); err == nil {
		err = cerr
	}
	return err
}

// respond serves the region until ctx is done, then prints its sha256.
func respond(ctx context.Context, o Options, psn uint32, dev *rdma.Device, out io.Writer) error {
	if o.MRSize < 1 || o.MRSize > MaxRegion {
		return fmt.Errorf("-mr-size %d out of range (1 to %d)", o.MRSize, MaxRegion)
	}
	if o.Recv < 0 || o.Recv > rdma.MaxRecvQueue {
		return fmt.Errorf("-recv %d out of range (0 to %d)", o.Recv, rdma.MaxRecvQueue)
	}
	region := make([]byte, o.MRSize)
	mr, err := dev.RegisterMR(region, rdma.AccessLocalWrite|rdma.AccessRemoteWrite|rdma.AccessRemoteRead)
	if err != nil {
		return err
	}
	cq, err := rdma.NewCQ(max(o.Recv, 1) + 16)
	if err != nil {
		return err
	}
	qp, err := dev.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, RecvQueue: max(o.Recv, 1)})
	if err != nil {
		return err
	}
	peer := o.Node.Host.Addr()
	if o.Peer != "" {
		if peer, err = netip.ParseAddr(o.Peer); err != nil {
			return fmt.Errorf("-peer: %w", err)
		}
	}
	if err := qp.Connect(rdma.QPAttrs{PeerAddr: peer, PeerQPN: uint32(o.PeerQPN), RecvPSN: uint32(o.PeerPSN),
		SendPSN: psn, PathMTU: o.PathMTU}); err != nil {
		return fmt.Errorf("path MTU %d: %w", o.PathMTU, err)
	}
	if o.Recv > 0 {
		bufs, err := dev.RegisterMR(make([]byte, o.Recv*o.PathMTU), rdma.AccessLocalWrite)
		if err != nil {
			return err
		}
		for i := range o.Recv {
			if err := qp.PostRecv(rdma.RecvWR{ID: uint64(i), Local: bufs, Offset: i * o.PathMTU, Length: o.PathMTU}); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(out, "{\"qpn\": %d, \"psn\": %d, \"rkey\": %d, \"addr\": %d, \"len\": %d, \"mtu\": %d}\n",
		qp.QPN(), psn, mr.RKey(), mr.Addr(), mr.Len(), o.PathMTU)
	fmt.Fprintln(out, "ready")
	<-ctx.Done()
	qp.Destroy() // nothing lands in the region after this
	fmt.Fprintf(out, "sha256 %x\n", sha256.Sum256(region))
	return nil
}

// request writes a pattern over the responder's region, reads it back and
// compares.
func request(ctx context.Context, o Options, psn uint32, dev *rdma.Device, out io.Writer) error {
	peer, err := netip.ParseAddr(o.Peer)
	if err != nil {
		return fmt.Errorf("-peer: %w", err)
	}
	if o.RLen < 1 || o.RLen > MaxRegion {
		return fmt.Errorf("-rlen %d out of range (1 to %d)", o.RLen, MaxRegion)
	}
	pattern := make([]byte, o.RLen)
	for i := range pattern {
		pattern[i] = byte(i*7 + i>>8)
	}
	src, err := dev.RegisterMR(pattern, 0)
	if err != nil {
		return err
	}
	back, err := dev.RegisterMR(make([]byte, o.RLen), rdma.AccessLocalWrite)
	if err != nil {
		return err
	}
	cq, _ := rdma.NewCQ(256)
	qp, err := dev.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq})
	if err != nil {
		return err
	}
	defer qp.Destroy()
	if err := qp.Connect(rdma.QPAttrs{PeerAddr: peer, PeerQPN: uint32(o.PeerQPN), RecvPSN: uint32(o.PeerPSN),
		SendPSN: psn, PathMTU: o.PathMTU}); err != nil {
		return fmt.Errorf("path MTU %d: %w", o.PathMTU, err)
	}
	fmt.Fprintf(out, "{\"qpn\": %d, \"psn\": %d, \"mtu\": %d}\n", qp.QPN(), psn, o.PathMTU)
	fmt.Fprintln(out, "ready")
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	const chunk = 64 << 10
	posted := 0
	for off := 0; off < o.RLen; off += chunk {
		wr := rdma.SendWR{ID: uint64(off), Op: rdma.OpWrite, Local: src, Offset: off, Length: min(chunk, o.RLen-off),
			RemoteAddr: o.RAddr + uint64(off), RKey: uint32(o.RKey)}
		if err := post(ctx, qp, cq, &wr, &posted); err != nil {
			return err
		}
	}
	// The READ completes after the WRITEs before it: it reads what they wrote.
	rd := rdma.SendWR{ID: 1 << 40, Op: rdma.OpRead, Local: back, Length: o.RLen, RemoteAddr: o.RAddr, RKey: uint32(o.RKey)}
	if err := post(ctx, qp, cq, &rd, &posted); err != nil {
		return err
	}
	if err := drain(ctx, cq, &posted, 0); err != nil {
		return err
	}
	if !bytes.Equal(back.Bytes(), pattern) {
		return errors.New("the region read back differs from what was written")
	}
	fmt.Fprintf(out, "sha256 %x\n", sha256.Sum256(pattern))
	return nil
}

// post posts wr, first waiting for completions while 64 are outstanding.
func post(ctx context.Context, qp *rdma.QP, cq *rdma.CQ, wr *rdma.SendWR, posted *int) error {
	if err := drain(ctx, cq, posted, 63); err != nil {
		return err
	}
	if err := qp.PostSend(wr); err != nil {
		return err
	}
	*posted++
	return nil
}

// drain waits for completions until at most left are outstanding.
func drain(ctx context.Context, cq *rdma.CQ, posted *int, left int) error {
	var cs [64]rdma.Completion
	for *posted > left {
		n, err := cq.Wait(ctx, cs[:])
		if err != nil {
			return err
		}
		for _, c := range cs[:n] {
			if c.Status != rdma.StatusSuccess {
				return fmt.Errorf("%v of request %d: %v", c.Op, c.ID, c.Status)
			}
		}
		*posted -= n
	}
	return nil
}

// printStats writes the non-zero rdma counters on one line.
func printStats(out io.Writer, st rdma.Stats) {
	var b strings.Builder
	b.WriteString("rdma:")
	v := reflect.ValueOf(st)
	for i := range v.NumField() {
		if x := v.Field(i).Uint(); x != 0 {
			fmt.Fprintf(&b, " %s=%d", v.Type().Field(i).Name, x)
		}
	}
	fmt.Fprintln(out, b.String())
}
