package pcap

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/tickwire/tickwire/internal/shareddata"
)

// TestSharedCapturesAllFormats reads the public captures in ../shared with
// the Reader and with gopacket, and again after editcap (when installed)
// rewrote each as nanosecond pcap and as pcapng: the frames, lengths and
// timestamps must be the same every time.
func TestSharedCapturesAllFormats(t *testing.T) {
	dir := shareddata.Path(t, "captures")
	files, _ := filepath.Glob(filepath.Join(dir, "*.pcap"))
	if len(files) == 0 {
		t.Skip("no captures in ../shared/captures")
	}
	editcap, _ := exec.LookPath("editcap")
	if editcap == "" {
		t.Log("editcap not installed: pcapng and nanosecond conversions not checked")
	}
	for _, path := range files {
		name := filepath.Base(path)
		want := readWithGopacket(t, path)
		variants := map[string]string{"original": path}
		if editcap != "" {
			for _, format := range []string{"nsecpcap", "pcapng"} {
				out := filepath.Join(t.TempDir(), name+"."+format)
				if b, err := exec.Command(editcap, "-F", format, path, out).CombinedOutput(); err != nil {
					t.Fatalf("editcap -F %s %s: %v: %s", format, name, err, b)
				}
				variants[format] = out
			}
		}
		for variant, p := range variants {
			r, err := Open(p)
			if err != nil {
				t.Fatalf("%s %s: %v", name, variant, err)
			}
			got, err := readAll(t, r, 65536)
			r.Close()
			if err != nil {
				t.Fatalf("%s %s: %v", name, variant, err)
			}
			wantFormat := map[string]Format{"nsecpcap": FormatPcapNano, "pcapng": FormatPcapNG}[variant]
			if wantFormat != 0 && r.Format() != wantFormat {
				t.Fatalf("%s %s: format %v", name, variant, r.Format())
			}
			if len(got) != len(want) {
				t.Fatalf("%s %s: %d frames, gopacket read %d", name, variant, len(got), len(want))
			}
			for i := range want {
				if got[i].ts != want[i].ts || got[i].wireLen != want[i].wireLen || !bytes.Equal(got[i].data, want[i].data) {
					t.Fatalf("%s %s frame %d differs from gopacket's", name, variant, i+1)
				}
			}
		}
		if strings.HasPrefix(name, "zeek_missing") {
			t.Logf("%s: %d frames in %d formats", name, len(want), len(variants))
		}
	}
}

func readWithGopacket(t *testing.T, path string) []testFrame {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []testFrame
	for {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			return out
		}
		out = append(out, testFrame{ts: ci.Timestamp.UnixNano(), data: data, wireLen: ci.Length})
	}
}
