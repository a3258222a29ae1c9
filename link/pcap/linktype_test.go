package pcap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/tickwire/tickwire/link/frame"
)

// classicWithLink is encodeClassic with another link type in the header.
func classicWithLink(frames []testFrame, link layers.LinkType) []byte {
	b := encodeClassic(frames, binary.LittleEndian, false)
	binary.LittleEndian.PutUint32(b[20:], uint32(link))
	return b
}

// TestReaderSupportedLinkTypes: classic files of every supported link type
// are read, and each frame carries the file's link type.
func TestReaderSupportedLinkTypes(t *testing.T) {
	for _, link := range []uint16{frame.LinkTypeEthernet, frame.LinkTypeRaw, frame.LinkTypeLinuxSLL, frame.LinkTypeIPv4, frame.LinkTypeLinuxSLL2} {
		want := makeFrames(5)
		for i := range want {
			want[i].link = link
		}
		r, err := NewReader(bytes.NewReader(classicWithLink(want, layers.LinkType(link))))
		if err != nil {
			t.Fatalf("link type %d: %v", link, err)
		}
		got, err := readAll(t, r, 2048)
		if err != nil {
			t.Fatalf("link type %d: %v", link, err)
		}
		checkSame(t, got, want)
	}
}

// TestReaderUnsupportedLinkType: a classic file of another link type is
// refused by NewReader, with an error naming it.
func TestReaderUnsupportedLinkType(t *testing.T) {
	for link, want := range map[layers.LinkType]string{
		layers.LinkTypeIEEE802_11: "pcap: unsupported link type 105 (IEEE802_11)",
		layers.LinkTypeNull:       "pcap: unsupported link type 0 (NULL)",
		4242:                      "pcap: unsupported link type 4242",
	} {
		_, err := NewReader(bytes.NewReader(classicWithLink(makeFrames(2), link)))
		var le *LinkTypeError
		if !errors.As(err, &le) || le.LinkType != uint16(link) || le.Interface != -1 || !errors.Is(err, ErrUnsupportedLinkType) {
			t.Fatalf("link type %d: err %v, want a *LinkTypeError", link, err)
		}
		if err.Error() != want {
			t.Fatalf("link type %d: %q, want %q", link, err, want)
		}
	}
}

// TestPcapngUnsupportedLinkType: a pcapng interface of an unsupported link
// type is harmless until a packet of it comes; that packet ends the read
// with a RecordError naming the link type and the interface, after the
// frames before it.
func TestPcapngUnsupportedLinkType(t *testing.T) {
	le := binary.LittleEndian
	n := newNG(le).iface(layers.LinkTypeEthernet, 0).iface(layers.LinkTypeIEEE802_11, 0).iface(layers.LinkTypeLinuxSLL2, 0)
	n.epb(0, 1, []byte("ethernet"), 8).epb(2, 2, []byte("cooked v2"), 9)
	silent := append([]byte(nil), n.b...)
	n.epb(1, 3, []byte("wifi"), 4).epb(0, 4, []byte("never read"), 10)

	r, err := NewReader(bytes.NewReader(silent))
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, r, 2048)
	if err != nil {
		t.Fatalf("silent 802.11 interface: %v", err)
	}
	checkSame(t, got, []testFrame{
		{ts: 1000, data: []byte("ethernet"), wireLen: 8},
		{ts: 2000, data: []byte("cooked v2"), wireLen: 9, link: frame.LinkTypeLinuxSLL2},
	})

	r, err = NewReader(bytes.NewReader(n.b))
	if err != nil {
		t.Fatal(err)
	}
	got, err = readAll(t, r, 2048)
	var re *RecordError
	var lte *LinkTypeError
	if len(got) != 2 || !errors.As(err, &re) || re.Record != 3 || !errors.As(err, &lte) || lte.Interface != 1 || lte.LinkType != 105 {
		t.Fatalf("%d frames, err %v; want 2 then record 3: interface 1 link type 105", len(got), err)
	}
	if want := "pcap: record 3: interface 1: unsupported link type 105 (IEEE802_11)"; err.Error() != want {
		t.Fatalf("%q, want %q", err, want)
	}
	if _, again := r.ReadFrames(frame.NewBatch(1, 64)); again != err {
		t.Fatalf("error not sticky: %v", again)
	}
}
