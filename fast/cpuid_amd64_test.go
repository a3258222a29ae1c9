//go:build !purego

package fast

import "testing"

func TestSlowPEXT(t *testing.T) {
	for _, c := range []struct {
		vendor string
		family uint32
		slow   bool
	}{
		{"AuthenticAMD", 0x15, true},  // Excavator: BMI2, microcoded PEXT
		{"AuthenticAMD", 0x17, true},  // Zen, Zen+, Zen 2
		{"AuthenticAMD", 0x19, false}, // Zen 3, Zen 4
		{"AuthenticAMD", 0x1a, false}, // Zen 5
		{"HygonGenuine", 0x18, true},
		{"GenuineIntel", 0x6, false},
	} {
		if got := slowPEXT(c.vendor, c.family); got != c.slow {
			t.Errorf("slowPEXT(%q, %#x) = %v, want %v", c.vendor, c.family, got, c.slow)
		}
	}
}

// TestCPUVendorFamily checks the CPUID reading on the machine at hand: a
// vendor string of 12 printable bytes and a family no CPU Go runs on is
// below (6, the Pentium Pro's, which every x86-64 CPU reports or exceeds).
func TestCPUVendorFamily(t *testing.T) {
	vendor, family := cpuVendorFamily()
	for _, c := range []byte(vendor) {
		if c < ' ' || c > '~' {
			t.Fatalf("vendor %q", vendor)
		}
	}
	if len(vendor) != 12 || family < 6 {
		t.Fatalf("vendor %q family %#x", vendor, family)
	}
	t.Logf("%s family %#x: slow PEXT %v, assembly loop %v", vendor, family, slowPEXT(vendor, family), haveAsmLoop)
}
