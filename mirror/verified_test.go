package mirror_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/tickwire/tickwire/mirror"
)

// TestHandleVerifiedLinkFrame: a segment whose TCP checksum is wrong is
// refused by HandleLinkFrame and taken by HandleVerifiedLinkFrame, which
// trusts the source's verdict instead of computing the sum, on the
// straight path (an active flow) and the general one (the SYN) alike.
func TestHandleVerifiedLinkFrame(t *testing.T) {
	rec := newRecorder(t)
	a, err := mirror.New(mirror.Config{Checksum: mirror.ChecksumVerify}, rec)
	if err != nil {
		t.Fatal(err)
	}
	frameOf := func(s seg) []byte {
		s.cs = csBad
		return ethernet(appendIPv4(nil, s))
	}
	if err := a.HandleVerifiedLinkFrame(1, frameOf(ab(100, fSYN, "")), 1); err != nil {
		t.Fatalf("verified SYN: %v", err)
	}
	if err := a.HandleLinkFrame(1, frameOf(ab(101, 0, "abc")), 2); !errors.Is(err, mirror.ErrTCPChecksum) {
		t.Fatalf("unverified segment with a bad checksum: %v, want ErrTCPChecksum", err)
	}
	if err := a.HandleVerifiedLinkFrame(1, frameOf(ab(101, 0, "abc")), 3); err != nil {
		t.Fatalf("verified segment: %v", err)
	}
	if err := a.HandleVerifiedLinkFrame(1, frameOf(ab(104, 0, "def")), 4); err != nil {
		t.Fatalf("verified segment: %v", err)
	}
	if got, want := eventsOf(rec, keyAB), []string{"start", `data 0 "abc"`, `data 3 "def"`}; !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	if st := a.Stats(); st.ChecksumBad != 1 {
		t.Fatalf("ChecksumBad = %d, want 1", st.ChecksumBad)
	}
}
