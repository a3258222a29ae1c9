package tickwire

import (
	"bytes"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestStatsAppendCoversEveryField gives every field a distinct value and
// checks that Append prints all of them, named as the field and in field
// order, so a counter added to Stats without a line fails here.
func TestStatsAppendCoversEveryField(t *testing.T) {
	var st Stats
	v := reflect.ValueOf(&st).Elem()
	var want strings.Builder
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() != reflect.Uint64 {
			t.Fatalf("field %s is %s: Append prints only uint64 counters", v.Type().Field(i).Name, f.Kind())
		}
		f.SetUint(uint64(i+1) * 1000003)
		want.WriteString(v.Type().Field(i).Name + " " + strconv.FormatUint(uint64(i+1)*1000003, 10) + "\n")
	}
	if v.NumField() != len(statsNames) {
		t.Fatalf("Stats has %d fields, statsNames %d", v.NumField(), len(statsNames))
	}
	if got := string(st.Append(nil)); got != want.String() {
		t.Fatalf("Append:\n%s\nwant:\n%s", got, want.String())
	}
	var buf bytes.Buffer
	n, err := st.WriteTo(&buf)
	if err != nil || n != int64(want.Len()) || buf.String() != want.String() {
		t.Fatalf("WriteTo = %d, %v; wrote:\n%s", n, err, buf.String())
	}
}

// TestStatsAppendSkipsZeros checks that zero counters print nothing and
// that the largest values fit statsLineMax.
func TestStatsAppendSkipsZeros(t *testing.T) {
	if got := (Stats{}).Append(nil); len(got) != 0 {
		t.Fatalf("zero Stats printed %q", got)
	}
	st := Stats{TCPRxPackets: 5, ConnsOpen: 2}
	if got := string(st.Append(nil)); got != "TCPRxPackets 5\nConnsOpen 2\n" {
		t.Fatalf("Append = %q", got)
	}
	for _, name := range statsNames {
		if line := len(name) + 1 + len("18446744073709551615") + 1; line > statsLineMax {
			t.Fatalf("%s: a line of %d bytes exceeds statsLineMax", name, line)
		}
	}
}

// TestStatsAppendAllocs checks that Append into a buffer with room does not
// allocate, and WriteTo allocates only its one buffer.
func TestStatsAppendAllocs(t *testing.T) {
	var st Stats
	v := reflect.ValueOf(&st).Elem()
	for i := range v.NumField() {
		v.Field(i).SetUint(^uint64(0))
	}
	buf := make([]byte, 0, len(statsNames)*statsLineMax)
	if n := testing.AllocsPerRun(100, func() { buf = st.Append(buf[:0]) }); n != 0 {
		t.Errorf("Append allocated %v times per call", n)
	}
	var out bytes.Buffer
	out.Grow(len(statsNames) * statsLineMax)
	if n := testing.AllocsPerRun(100, func() { out.Reset(); st.WriteTo(&out) }); n > 1 {
		t.Errorf("WriteTo allocated %v times per call, want at most 1", n)
	}
}

func ExampleStats_WriteTo() {
	st := Stats{IPv4RxPackets: 3, ICMPEchoRequestsRx: 3, ICMPEchoRepliesTx: 3}
	st.WriteTo(os.Stdout)
	// Output:
	// IPv4RxPackets 3
	// ICMPEchoRequestsRx 3
	// ICMPEchoRepliesTx 3
}
