package hwoffload

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
)

// docTables returns REGISTERS.md's tables by section title: per table its
// rows (header row left out), each as trimmed cells.
func docTables(t *testing.T) map[string][][][]string {
	t.Helper()
	b, err := os.ReadFile("REGISTERS.md")
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string][][][]string{}
	section, inTable := "", false
	for _, line := range strings.Split(string(b), "\n") {
		if s, ok := strings.CutPrefix(line, "## "); ok {
			section, inTable = s, false
			continue
		}
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		if !inTable { // the header row starts a table
			tables[section] = append(tables[section], nil)
			inTable = true
			continue
		}
		if strings.HasPrefix(line, "|---") {
			continue
		}
		line = strings.ReplaceAll(strings.Trim(line, "|"), `\|`, "\x00")
		var row []string
		for _, c := range strings.Split(line, "|") {
			row = append(row, strings.ReplaceAll(strings.TrimSpace(c), "\x00", "|"))
		}
		ts := tables[section]
		ts[len(ts)-1] = append(ts[len(ts)-1], row)
	}
	return tables
}

// cols returns the first n cells of each row.
func cols(rows [][]string, n int) [][]string {
	out := make([][]string, 0, len(rows))
	for _, r := range rows {
		if len(r) < n {
			out = append(out, r)
			continue
		}
		out = append(out, r[:n])
	}
	return out
}

func TestRegistersDoc(t *testing.T) {
	doc := docTables(t)
	table := func(section string, i, n int) [][]string {
		ts := doc[section]
		if i >= len(ts) {
			t.Fatalf("REGISTERS.md: no table %d in section %q", i, section)
		}
		return cols(ts[i], n)
	}
	check := func(what string, got, want [][]string) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			for i := range max(len(got), len(want)) {
				var g, w []string
				if i < len(got) {
					g = got[i]
				}
				if i < len(want) {
					w = want[i]
				}
				if !reflect.DeepEqual(g, w) {
					t.Errorf("REGISTERS.md %s row %d: %q, Go says %q", what, i, g, w)
				}
			}
		}
	}

	var want [][]string
	for _, r := range Registers {
		want = append(want, []string{fmt.Sprintf("0x%04X", r.Offset), r.Name, fmt.Sprint(r.Bits), string(r.Access)})
	}
	check("Registers", table("Registers", 0, 4), want)

	want = nil
	for _, r := range RingRegisters {
		want = append(want, []string{fmt.Sprintf("+0x%02X", r.Offset), r.Name, fmt.Sprint(r.Bits), string(r.Access)})
	}
	check("Ring registers", table("Ring registers", 0, 4), want)
	check("rings", table("Ring registers", 1, 1), [][]string{
		{fmt.Sprint(RingTrades)}, {fmt.Sprint(RingOrders)}, {fmt.Sprint(RingEvents)}, {fmt.Sprint(RingHost)}})

	hex := func(v int) string { return fmt.Sprintf("0x%X", v) }
	check("Values", table("Values", 0, 2), [][]string{
		{"MAGIC", hex(Magic)}, {"VERSION", fmt.Sprint(Version)}, {"CYCLE_HZ", fmt.Sprint(CycleHz)},
		{"CONTROL_RUN", hex(ControlRun)}, {"CONTROL_RESET", hex(ControlReset)},
		{"STATUS_RUNNING", hex(StatusRunning)}, {"STATUS_LINK_UP", hex(StatusLinkUp)},
		{"STATUS_INPUT_DONE", hex(StatusInputDone)}, {"STATUS_ERROR", hex(StatusError)},
		{"MIRROR_ENABLE", hex(MirrorEnable)}, {"FAST_ENABLE", hex(FastEnable)},
		{"WINDOW_BYTES", hex(WindowBytes)}, {"NUM_RINGS", fmt.Sprint(NumRings)},
		{"SLOT_BYTES", fmt.Sprint(SlotBytes)}, {"RING_ALIGN", fmt.Sprint(RingAlign)},
		{"MIN_LOG2_SLOTS", fmt.Sprint(MinLog2Slots)}, {"MAX_LOG2_SLOTS", fmt.Sprint(MaxLog2Slots)},
		{"MAX_ARP_ENTRIES", fmt.Sprint(MaxARPEntries)},
	})

	want = nil
	for _, c := range ErrorCodes {
		want = append(want, []string{fmt.Sprint(uint32(c.Code)), c.Name})
	}
	check("Error codes", table("Error codes", 0, 2), want)

	check("Record kinds", table("Record kinds", 0, 3), [][]string{
		{fmt.Sprint(KindTCPGap), "TCP_GAP", "2"}, {fmt.Sprint(KindSeqGap), "SEQ_GAP", "2"},
		{fmt.Sprint(KindDecodeError), "DECODE_ERROR", "2"}, {fmt.Sprint(KindFlowStart), "FLOW_START", "2"},
		{fmt.Sprint(KindFlowEnd), "FLOW_END", "2"}, {fmt.Sprint(KindTrade), "TRADE", fmt.Sprint(RingTrades)},
		{fmt.Sprint(KindOrder), "ORDER", fmt.Sprint(RingOrders)},
	})

	type field struct {
		off  int
		name string
		typ  string
		bit  int // present bit mask, 0 for none
	}
	rows := func(fs []field, withBit bool) [][]string {
		var out [][]string
		for _, f := range fs {
			r := []string{fmt.Sprint(f.off), f.name, f.typ}
			if withBit {
				b := "-"
				if f.bit != 0 {
					for i := 0; i < 16; i++ {
						if f.bit == 1<<i {
							b = fmt.Sprint(i)
						}
					}
				}
				r = append(r, b)
			}
			out = append(out, r)
		}
		return out
	}
	check("Record header", table("Record header", 0, 3), rows([]field{
		{SlotKind, "kind", "u16", 0}, {SlotPresent, "present", "u16", 0}, {SlotFlow, "flow", "u32", 0},
		{SlotSeq, "seq", "u64", 0}, {SlotRxCycles, "rx_cycles", "u64", 0}, {SlotOutCycles, "out_cycles", "u64", 0},
	}, false))
	check("Trade record", table("Trade record", 0, 4), rows([]field{
		{TradeIndex, "TradeIndex", "u32", 0},
		{TradeChannel, "TradeChannel", "u32", TradeHasChannel},
		{TradeStatus, "DataStatus", "i32", TradeHasDataStatus},
		{TradeTime, "TradeTime", "u32", TradeHasTime},
		{TradeSecurity, "SecurityID", "[6]u8", 0},
		{TradeBSFlag, "TradeBSFlag", "u8", TradeHasBSFlag},
		{TradePrice, "TradePrice", "i32", TradeHasPrice},
		{TradeQty, "TradeQty", "i64", TradeHasQty},
		{TradeMoney, "TradeMoney", "i64", TradeHasMoney},
		{TradeBuyNo, "TradeBuyNo", "u64", TradeHasBuyNo},
		{TradeSellNo, "TradeSellNo", "u64", TradeHasSellNo},
		{TradeBizIndex, "BizIndex", "u64", 0},
	}, true))
	check("Order record", table("Order record", 0, 4), rows([]field{
		{OrderIndex, "OrderIndex", "u32", 0},
		{OrderChannel, "OrderChannel", "u32", OrderHasChannel},
		{OrderTime, "OrderTime", "u32", OrderHasTime},
		{OrderPrice, "OrderPrice", "u32", OrderHasPrice},
		{OrderSecurity, "SecurityID", "[6]u8", 0},
		{OrderType, "OrderType", "u8", 0},
		{OrderBSFlag, "OrderBSFlag", "u8", 0},
		{OrderNO, "OrderNO", "u64", 0},
		{OrderBalance, "Balance", "u64", OrderHasBalance},
		{OrderBizIndex, "BizIndex", "u64", 0},
	}, true))

	ev := func(kind int, fs []field) (out [][]string) {
		for _, r := range rows(fs, false) {
			out = append(out, append([]string{fmt.Sprint(kind)}, r...))
		}
		return out
	}
	flow := []field{{FlowSrcIP, "source IPv4", "u32", 0}, {FlowDstIP, "destination IPv4", "u32", 0},
		{FlowSrcPort, "source port", "u16", 0}, {FlowDstPort, "destination port", "u16", 0}}
	want = ev(KindTCPGap, []field{{GapOffset, "stream offset", "u64", 0}, {GapLength, "length", "u64", 0}})
	want = append(want, ev(KindSeqGap, []field{{SeqGapCategory, "category", "u32", 0},
		{SeqGapExpected, "expected", "u64", 0}, {SeqGapReceived, "received", "u64", 0}})...)
	want = append(want, ev(KindDecodeError, []field{{DecodeErrorOffset, "stream offset", "u64", 0},
		{DecodeErrorCode, "code", "[8]u8", 0}})...)
	want = append(want, ev(KindFlowStart, flow)...)
	want = append(want, ev(KindFlowEnd, append(flow, field{FlowReason, "reason", "u8", 0}))...)
	check("Event records", table("Event records", 0, 4), want)

	check("Flow end reasons", table("Flow end reasons", 0, 2), [][]string{
		{fmt.Sprint(EndFIN), "FIN"}, {fmt.Sprint(EndRST), "RST"}, {fmt.Sprint(EndEvicted), "EVICTED"},
		{fmt.Sprint(EndInput), "END_OF_INPUT"}, {fmt.Sprint(EndRestart), "RESTART"},
	})

	regRows := func(rs []Register, format string) (out [][]string) {
		for _, r := range rs {
			out = append(out, []string{fmt.Sprintf(format, r.Offset), r.Name, fmt.Sprint(r.Bits), string(r.Access)})
		}
		return out
	}
	check("Host path registers", table("Host path", 0, 4), regRows(HostRegisters, "0x%04X"))
	check("Session registers", table("Host path", 1, 4), regRows(SessionRegisters, "+0x%02X"))
	fieldRows := func(fs []Field) (out [][]string) {
		for _, f := range fs {
			r := []string{fmt.Sprint(f.Offset), f.Name, f.Type}
			if f.Kind != 0 {
				r = append([]string{fmt.Sprint(f.Kind)}, r...)
			}
			out = append(out, r)
		}
		return out
	}
	check("ARP entry", table("Host path", 2, 3), fieldRows(ARPFields))
	check("Command slot", table("Host path", 3, 3), fieldRows(CommandFields))
	want = nil
	for _, o := range Ops {
		want = append(want, []string{fmt.Sprint(o.Op), o.Name})
	}
	check("Commands", table("Host path", 4, 2), want)
	want = nil
	for _, st := range HostStatuses {
		want = append(want, []string{fmt.Sprint(uint16(st.Status)), st.Name})
	}
	check("Completion statuses", table("Host path", 5, 2), want)
	check("Ring 3 kinds", table("Host path", 6, 2), [][]string{
		{fmt.Sprint(KindCompletion), "COMPLETION"}, {fmt.Sprint(KindAccepted), "ACCEPTED"},
		{fmt.Sprint(KindRecv), "RECV"}, {fmt.Sprint(KindPeerClosed), "PEER_CLOSED"}, {fmt.Sprint(KindUDPRecv), "UDP_RECV"},
	})
	check("Ring 3 records", table("Host path", 7, 4), fieldRows(HostRecordFields))
	check("Host values", [][]string{{fmt.Sprint(CmdSlotBytes), fmt.Sprint(Sessions), fmt.Sprint(SessBufBytes),
		fmt.Sprint(UDPAreaBytes), fmt.Sprint(MaxDatagram)}}, [][]string{{"64", "64", "32768", "65536", "1472"}})
}

// TestRegisterMap checks the map's invariants: registers inside the window,
// aligned to their width, not overlapping; ring registers inside a stride.
func TestRegisterMap(t *testing.T) {
	used := map[int]string{}
	claim := func(name string, off, bits int) {
		if off%(bits/8) != 0 || off < 0 || off+bits/8 > WindowBytes {
			t.Errorf("%s at %#x: misaligned or outside the window", name, off)
		}
		for b := off; b < off+bits/8; b++ {
			if other, ok := used[b]; ok {
				t.Errorf("%s at %#x overlaps %s", name, off, other)
			}
			used[b] = name
		}
	}
	for _, r := range Registers {
		claim(r.Name, r.Offset, r.Bits)
	}
	for k := range NumRings {
		for _, r := range RingRegisters {
			if r.Offset+r.Bits/8 > RingStride {
				t.Errorf("ring register %s outside the stride", r.Name)
			}
			claim(fmt.Sprintf("RING%d_%s", k, r.Name), RingReg(k, r.Offset), r.Bits)
		}
	}
	for _, r := range HostRegisters {
		claim(r.Name, r.Offset, r.Bits)
	}
	for i := range Sessions {
		for _, r := range SessionRegisters {
			claim(fmt.Sprintf("SESS%d_%s", i, r.Name), SessReg(i, r.Offset), r.Bits)
		}
	}
	for i := range MaxARPEntries {
		for _, f := range ARPFields {
			claim(fmt.Sprintf("ARP%d_%s", i, f.Name), ARPReg(i, f.Offset), 32)
		}
	}
	for off := RegUDPPorts; off < RegListenPorts+PortBitmapSize; off += 4 {
		claim("PORT_BITMAPS", off, 32)
	}
	if RegListenPorts != RegUDPPorts+PortBitmapSize || PortBitmapSize*8 != 65536 {
		t.Error("port bitmaps")
	}
	if RegMagic != 0 || Magic != 0x31305754 || string([]byte{0x54, 0x57, 0x30, 0x31}) != "TW01" {
		t.Error("MAGIC")
	}
}
