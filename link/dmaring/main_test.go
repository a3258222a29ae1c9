package dmaring

import (
	"testing"

	"github.com/tickwire/tickwire/internal/leakcheck"
)

// TestMain panics on a leaked PacketBuffer reference and fails when a test
// leaves a goroutine behind (every Stack must be closed).
func TestMain(m *testing.M) { leakcheck.Main(m) }
