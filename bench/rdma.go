package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pipe"
	"github.com/tickwire/tickwire/rdma"
)

// rdmaBWMessage is rdma_write_bw's message size: BALBOA reaches line rate
// from 32 KB messages.
const (
	rdmaBWMessage  = 32 << 10
	rdmaBWInFlight = 16 // WRITEs outstanding
)

// rdmaPair is two tickwire stacks over link/pipe (IP MTU 9000, so that the
// path MTU can be 4096) with a connected RC queue pair on each.
type rdmaPair struct {
	sa, sb   *tickwire.Stack
	da, db   *rdma.Device
	qa       *rdma.QP
	cq       *rdma.CQ
	src, dst *rdma.MR
}

func newRDMAPair(hook bool) (*rdmaPair, error) {
	a, b := pipe.New(pipe.Options{MTU: 9000, QueueLen: 4096})
	arp := map[netip.Addr]net.HardwareAddr{clientPrefix.Addr(): a.MAC(), serverPrefix.Addr(): b.MAC()}
	r := &rdmaPair{}
	var err error
	if r.sa, err = tickwire.New(tickwire.Config{Link: a, MAC: a.MAC(), Addr: clientPrefix, MTU: 9000, StaticARP: arp, Latency: true, UDPReceiveQueue: 1024}); err != nil {
		b.Close()
		return nil, err
	}
	if r.sb, err = tickwire.New(tickwire.Config{Link: b, MAC: b.MAC(), Addr: serverPrefix, MTU: 9000, StaticARP: arp, Latency: true, UDPReceiveQueue: 1024}); err != nil {
		r.sa.Close()
		return nil, err
	}
	if err := r.connect(hook); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *rdmaPair) connect(hook bool) error {
	var err error
	if r.da, err = rdma.Open(r.sa); err != nil {
		return err
	}
	if r.db, err = rdma.Open(r.sb); err != nil {
		return err
	}
	if r.cq, err = rdma.NewCQ(256); err != nil {
		return err
	}
	cqb, _ := rdma.NewCQ(256)
	ca, cb := rdma.QPConfig{SendCQ: r.cq, RecvCQ: r.cq}, rdma.QPConfig{SendCQ: cqb, RecvCQ: cqb}
	if hook {
		g, err := rdma.NewAESGCM(bytes.Repeat([]byte{0x42}, 32))
		if err != nil {
			return err
		}
		ca.Hook, cb.Hook = g, g
		ca.HookSlots, ca.HookMessage, cb.HookMessage = rdmaBWInFlight, rdmaBWMessage, rdmaBWMessage
	}
	qa, err := r.da.CreateQP(ca)
	if err != nil {
		return err
	}
	qb, err := r.db.CreateQP(cb)
	if err != nil {
		return err
	}
	r.qa = qa
	if err := qa.Connect(rdma.QPAttrs{PeerAddr: serverPrefix.Addr(), PeerQPN: qb.QPN(), RecvPSN: 1, SendPSN: 2, PathMTU: 4096}); err != nil {
		return err
	}
	if err := qb.Connect(rdma.QPAttrs{PeerAddr: clientPrefix.Addr(), PeerQPN: qa.QPN(), RecvPSN: 2, SendPSN: 1, PathMTU: 4096}); err != nil {
		return err
	}
	if r.src, err = r.da.RegisterMR(make([]byte, rdmaBWMessage), 0); err != nil {
		return err
	}
	r.dst, err = r.db.RegisterMR(make([]byte, rdmaBWInFlight*rdmaBWMessage), rdma.AccessRemoteWrite)
	return err
}

func (r *rdmaPair) close() {
	if r.da != nil {
		r.da.Close()
	}
	if r.db != nil {
		r.db.Close()
	}
	r.sa.Close()
	r.sb.Close()
}

// errRDMA fails a round on a completion that is not a success.
var errRDMA = errors.New("bench: RDMA WRITE failed")

// writeLatency times one 64-byte WRITE from PostSend to its completion
// (polled, yielding between polls as the TCP handler client does).
func (r *rdmaPair) writeLatency(p params) (sample, error) {
	wr := rdma.SendWR{Op: rdma.OpWrite, Local: r.src, Length: rttSize, RemoteAddr: r.dst.Addr(), RKey: r.dst.RKey()}
	var cs [1]rdma.Completion
	deadline := time.Now().Add(p.dur + stallTimeout)
	return timeOps(p.dur, 200, true, func() error {
		if err := r.qa.PostSend(&wr); err != nil {
			return err
		}
		for spins := 0; r.cq.Poll(cs[:]) == 0; spins++ {
			if spins%1024 == 1023 && time.Now().After(deadline) {
				return errStalled
			}
			runtime.Gosched()
		}
		if cs[0].Status != rdma.StatusSuccess {
			return fmt.Errorf("%w: %v", errRDMA, cs[0].Status)
		}
		return nil
	})
}

// writeBandwidth WRITEs rdmaBWMessage-byte messages, rdmaBWInFlight
// outstanding, for p.dur, and reports the completed bytes in Gb/s.
func (r *rdmaPair) writeBandwidth(p params) (sample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.dur+stallTimeout)
	defer cancel()
	var cs [rdmaBWInFlight]rdma.Completion
	wrs := make([]rdma.SendWR, rdmaBWInFlight)
	for i := range wrs {
		wrs[i] = rdma.SendWR{ID: uint64(i), Op: rdma.OpWrite, Local: r.src, Length: rdmaBWMessage,
			RemoteAddr: r.dst.Addr() + uint64(i*rdmaBWMessage), RKey: r.dst.RKey()}
	}
	var s sample
	outstanding := 0
	m0 := mallocs()
	start := time.Now()
	for i := range wrs {
		if err := r.qa.PostSend(&wrs[i]); err != nil {
			return s, err
		}
		outstanding++
	}
	for outstanding > 0 {
		n, err := r.cq.Wait(ctx, cs[:])
		if err != nil {
			return s, err
		}
		outstanding -= n
		more := time.Since(start) < p.dur
		for _, c := range cs[:n] {
			if c.Status != rdma.StatusSuccess {
				return s, fmt.Errorf("%w: %v", errRDMA, c.Status)
			}
			s.ops++
			if more {
				if err := r.qa.PostSend(&wrs[c.ID]); err != nil {
					return s, err
				}
				outstanding++
			}
		}
	}
	elapsed := time.Since(start)
	s.allocs = mallocs() - m0
	s.value = float64(s.ops) * rdmaBWMessage * 8 / elapsed.Seconds() / 1e9
	return s, nil
}

func setupRDMAWriteLatency(p params) (*pair, error) {
	r, err := newRDMAPair(false)
	if err != nil {
		return nil, err
	}
	tp, err := setupTCPRTTLatency(p)
	if err != nil {
		r.close()
		return nil, err
	}
	return &pair{
		tickwire: func() (sample, error) { return r.writeLatency(p) },
		baseline: tp.tickwire,
		close:    func() { r.close(); tp.close() },
	}, nil
}

func setupRDMAWriteBW(p params) (*pair, error) {
	r, err := newRDMAPair(false)
	if err != nil {
		return nil, err
	}
	tb, err := setupBulk(p)
	if err != nil {
		r.close()
		return nil, err
	}
	return &pair{
		tickwire: func() (sample, error) { return r.writeBandwidth(p) },
		baseline: tb.tickwire,
		close:    func() { r.close(); tb.close() },
	}, nil
}

func setupRDMAAESGCMBW(p params) (*pair, error) {
	r, err := newRDMAPair(true)
	if err != nil {
		return nil, err
	}
	plain, err := newRDMAPair(false)
	if err != nil {
		r.close()
		return nil, err
	}
	return &pair{
		tickwire: func() (sample, error) { return r.writeBandwidth(p) },
		baseline: func() (sample, error) { return plain.writeBandwidth(p) },
		close:    func() { r.close(); plain.close() },
	}, nil
}
