//go:build linux && (amd64 || arm64)

package afxdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	ebpflink "github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Program names: what a tickwire program is recognised by. At most 15
// bytes (BPF_OBJ_NAME_LEN).
const (
	programPrefix   = "tickwire_"
	endpointProgram = programPrefix + "xdp"
	captureProgram  = programPrefix + "cap"
)

// XDP verdicts and struct xdp_md offsets (include/uapi/linux/bpf.h).
const (
	xdpPass = 2

	mdData         = 0
	mdDataEnd      = 4
	mdRxQueueIndex = 16
)

// Ethernet and IPv4 offsets in a frame without a VLAN tag.
const (
	offEtherType = 12
	offIPv4      = 14
	offIPv4Frag  = offIPv4 + 6
	offIPv4Proto = offIPv4 + 9
	offIPv4Src   = offIPv4 + 12
	offIPv4Dst   = offIPv4 + 16
	offARPTarget = offIPv4 + 24 // target protocol address of an Ethernet/IPv4 ARP packet
)

// be16 and be32 return the value a native load of big-endian bytes gives
// (the program compares loaded packet words with these).
func be16(v uint16) int32 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return int32(binary.NativeEndian.Uint16(b[:]))
}

func be32(b [4]byte) int32 { return int32(binary.NativeEndian.Uint32(b[:])) }

// Registers of the programs: R6 the context, R2 data, R3 data_end; R4 and
// R5 scratch.

// prologue loads data and data_end and passes frames shorter than an
// Ethernet header.
func prologue() asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R6, mdData, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, mdDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, offIPv4),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),
		asm.LoadMem(asm.R5, asm.R2, offEtherType, asm.Half),
	}
}

// need passes the frame unless it has at least n bytes.
func need(n int32) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, n),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),
	}
}

// epilogue redirects to the socket of the frame's receive queue, or
// passes when that queue has none (the low bits of bpf_redirect_map's
// flags are the verdict for a missing entry, since Linux 5.3).
func epilogue(xsks *ebpf.Map) asm.Instructions {
	return asm.Instructions{
		asm.LoadMapPtr(asm.R1, xsks.FD()).WithSymbol("redirect"),
		asm.LoadMem(asm.R2, asm.R6, mdRxQueueIndex, asm.Word),
		asm.Mov.Imm(asm.R3, xdpPass),
		asm.FnRedirectMap.Call(),
		asm.Return(),
		asm.Mov.Imm(asm.R0, xdpPass).WithSymbol("pass"),
		asm.Return(),
	}
}

// endpointInstructions redirects IPv4 frames to addr and ARP frames whose
// target is addr.
func endpointInstructions(xsks *ebpf.Map, addr [4]byte) asm.Instructions {
	ip := be32(addr)
	insns := prologue()
	insns = append(insns,
		asm.JEq.Imm32(asm.R5, be16(0x0800), "ipv4"),
		asm.JEq.Imm32(asm.R5, be16(0x0806), "arp"),
		asm.Ja.Label("pass"),
	)
	ipv4 := need(offIPv4Dst + 4)
	ipv4[0] = ipv4[0].WithSymbol("ipv4")
	insns = append(insns, ipv4...)
	insns = append(insns,
		asm.LoadMem(asm.R5, asm.R2, offIPv4Dst, asm.Word),
		asm.JEq.Imm32(asm.R5, ip, "redirect"),
		asm.Ja.Label("pass"),
	)
	arp := need(offARPTarget + 4)
	arp[0] = arp[0].WithSymbol("arp")
	insns = append(insns, arp...)
	insns = append(insns,
		asm.LoadMem(asm.R5, asm.R2, offARPTarget, asm.Word),
		asm.JEq.Imm32(asm.R5, ip, "redirect"),
		asm.Ja.Label("pass"),
	)
	return append(insns, epilogue(xsks)...)
}

// captureInstructions redirects IPv4 frames that match f.
func captureInstructions(xsks *ebpf.Map, f Filter) asm.Instructions {
	insns := prologue()
	insns = append(insns, asm.JNE.Imm32(asm.R5, be16(0x0800), "pass"))
	insns = append(insns, need(offIPv4+20)...)
	if f.Host.IsValid() {
		ip := be32(f.Host.As4())
		next := "port"
		if f.Port == 0 {
			next = "redirect"
		}
		insns = append(insns,
			asm.LoadMem(asm.R5, asm.R2, offIPv4Src, asm.Word),
			asm.JEq.Imm32(asm.R5, ip, next),
			asm.LoadMem(asm.R5, asm.R2, offIPv4Dst, asm.Word),
			asm.JEq.Imm32(asm.R5, ip, next),
			asm.Ja.Label("pass"),
		)
	}
	if f.Port != 0 {
		port := be16(f.Port)
		insns = append(insns,
			// TCP or UDP only.
			asm.LoadMem(asm.R5, asm.R2, offIPv4Proto, asm.Byte).WithSymbol("port"),
			asm.JEq.Imm32(asm.R5, unix.IPPROTO_TCP, "first"),
			asm.JEq.Imm32(asm.R5, unix.IPPROTO_UDP, "first"),
			asm.Ja.Label("pass"),
			// Only a first fragment carries ports.
			asm.LoadMem(asm.R5, asm.R2, offIPv4Frag, asm.Half).WithSymbol("first"),
			asm.And.Imm(asm.R5, be16(0x1fff)),
			asm.JNE.Imm32(asm.R5, 0, "pass"),
			// R4 = data + 14 + IHL*4: the transport header.
			asm.LoadMem(asm.R5, asm.R2, offIPv4, asm.Byte),
			asm.And.Imm(asm.R5, 0x0f),
			asm.LSh.Imm(asm.R5, 2),
			asm.JLT.Imm(asm.R5, 20, "pass"),
			asm.Mov.Reg(asm.R4, asm.R2),
			asm.Add.Imm(asm.R4, offIPv4),
			asm.Add.Reg(asm.R4, asm.R5),
			asm.Mov.Reg(asm.R5, asm.R4),
			asm.Add.Imm(asm.R5, 4),
			asm.JGT.Reg(asm.R5, asm.R3, "pass"),
			asm.LoadMem(asm.R5, asm.R4, 0, asm.Half),
			asm.JEq.Imm32(asm.R5, port, "redirect"),
			asm.LoadMem(asm.R5, asm.R4, 2, asm.Half),
			asm.JEq.Imm32(asm.R5, port, "redirect"),
			asm.Ja.Label("pass"),
		)
	} else if !f.Host.IsValid() {
		insns = append(insns, asm.Ja.Label("pass"))
	}
	return append(insns, epilogue(xsks)...)
}

// program is an XDP program attached to an interface with its XSKMAP.
type program struct {
	xsks *ebpf.Map
	prog *ebpf.Program
	link ebpflink.Link
	mode AttachMode // the mode it got: AttachDriver or AttachGeneric
}

// loadProgram creates the XSKMAP (one entry per receive queue) and the
// program that insns builds around it.
func loadProgram(name string, rxQueues int, build func(*ebpf.Map) asm.Instructions) (*program, error) {
	xsks, err := ebpf.NewMap(&ebpf.MapSpec{
		Name:       name,
		Type:       ebpf.XSKMap,
		KeySize:    4,
		ValueSize:  4,
		MaxEntries: uint32(max(rxQueues, 1)),
	})
	if err != nil {
		return nil, bpfError("create XSKMAP", err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         name,
		Type:         ebpf.XDP,
		Instructions: build(xsks),
		License:      "Apache-2.0",
	})
	if err != nil {
		xsks.Close()
		return nil, bpfError("load XDP program", err)
	}
	return &program{xsks: xsks, prog: prog}, nil
}

func bpfError(step string, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("%s: %w: %w", step, ErrPermission, err)
	}
	return fmt.Errorf("%s: %w", step, err)
}

// insert puts the socket fd in the map at its queue.
func (p *program) insert(queue, fd int) error {
	if err := p.xsks.Put(uint32(queue), uint32(fd)); err != nil {
		return fmt.Errorf("XSKMAP entry for queue %d: %w", queue, err)
	}
	return nil
}

// attach makes room (see clearAttached) and attaches the program with a
// BPF link in the requested mode.
func (p *program) attach(ifindex int, mode AttachMode, replace bool) error {
	if err := clearAttached(ifindex, replace); err != nil {
		return err
	}
	try := func(m AttachMode) error {
		flags := ebpflink.XDPDriverMode
		if m == AttachGeneric {
			flags = ebpflink.XDPGenericMode
		}
		l, err := ebpflink.AttachXDP(ebpflink.XDPOptions{Program: p.prog, Interface: ifindex, Flags: flags})
		if err != nil {
			return err
		}
		p.link, p.mode = l, m
		return nil
	}
	var err error
	switch mode {
	case AttachAuto:
		if err = try(AttachDriver); err != nil {
			err = try(AttachGeneric)
		}
	default:
		err = try(mode)
	}
	if err != nil {
		if errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EEXIST) {
			// Someone attached between our check and our attach.
			if li, qerr := queryLink(ifindex); qerr == nil && li.attached != xdpAttachedNone {
				return attachedError(li, true)
			}
		}
		return bpfError("attach XDP program ("+mode.String()+" mode)", err)
	}
	return nil
}

// clearAttached checks the interface for an XDP program. None: fine. A
// tickwire program, or any with replace: detach it through netlink, which
// the kernel refuses when a live BPF link holds the program. Otherwise an
// *AttachedError.
func clearAttached(ifindex int, replace bool) error {
	li, err := queryLink(ifindex)
	if err != nil {
		return err
	}
	if li.attached == xdpAttachedNone {
		return nil
	}
	name := ""
	id := li.progID
	if id == 0 {
		id = max(li.drvID, li.skbID, li.hwID)
	}
	if p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id)); err == nil {
		if info, err := p.Info(); err == nil {
			name = info.Name
		}
		p.Close()
	}
	stale := strings.HasPrefix(name, programPrefix)
	if !stale && !replace {
		return attachedError(li, false, name)
	}
	for _, m := range []struct {
		id   uint32
		flag uint32
	}{{li.drvID, unix.XDP_FLAGS_DRV_MODE}, {li.skbID, unix.XDP_FLAGS_SKB_MODE}, {li.hwID, unix.XDP_FLAGS_HW_MODE}} {
		if m.id == 0 {
			continue
		}
		if err := detachNetlink(ifindex, m.flag); err != nil {
			if errors.Is(err, unix.EBUSY) {
				return attachedError(li, true, name)
			}
			return bpfError("detach the attached XDP program", err)
		}
	}
	return nil
}

func attachedError(li linkInfo, held bool, name ...string) *AttachedError {
	id := li.progID
	if id == 0 {
		id = max(li.drvID, li.skbID, li.hwID)
	}
	e := &AttachedError{ProgramID: id, Mode: attachedName(li.attached), Held: held}
	if len(name) > 0 {
		e.ProgramName = name[0]
	}
	return e
}

// close detaches the program (closing the BPF link) and frees it and the
// map.
func (p *program) close(queues []int) {
	// Drop the map's references to the sockets now: a map is freed in a
	// deferred work item, and until then it would keep the sockets, and
	// their hold on the queues, alive.
	for _, q := range queues {
		p.xsks.Delete(uint32(q))
	}
	if p.link != nil {
		p.link.Close()
	}
	p.prog.Close()
	p.xsks.Close()
}
