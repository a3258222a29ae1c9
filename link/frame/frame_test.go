package frame

import "testing"

func TestNewBatchSlotsDoNotOverlap(t *testing.T) {
	batch := NewBatch(4, 16)
	for i := range batch {
		if len(batch[i].Buf) != 16 || cap(batch[i].Buf) != 16 {
			t.Fatalf("slot %d: len %d cap %d, want 16/16", i, len(batch[i].Buf), cap(batch[i].Buf))
		}
		for j := range batch[i].Buf {
			batch[i].Buf[j] = byte(i)
		}
	}
	for i := range batch {
		for _, b := range batch[i].Buf {
			if b != byte(i) {
				t.Fatalf("slot %d overwritten by slot %d", i, b)
			}
		}
	}
}

func TestFrameDataAndTruncated(t *testing.T) {
	f := Frame{Buf: make([]byte, 8), N: 8, WireLen: 12}
	if len(f.Data()) != 8 || !f.Truncated() {
		t.Fatalf("Data len %d truncated %v, want 8 true", len(f.Data()), f.Truncated())
	}
	f.WireLen = 8
	if f.Truncated() {
		t.Fatal("whole frame reported truncated")
	}
}

func TestLinkTypeName(t *testing.T) {
	for lt, want := range map[uint16]string{
		LinkTypeEthernet: "ETHERNET", LinkTypeRaw: "RAW", LinkTypeLinuxSLL: "LINUX_SLL",
		LinkTypeIPv4: "IPV4", LinkTypeLinuxSLL2: "LINUX_SLL2", 105: "IEEE802_11", 0: "NULL", 999: "",
	} {
		if got := LinkTypeName(lt); got != want {
			t.Errorf("LinkTypeName(%d) = %q, want %q", lt, got, want)
		}
	}
}
