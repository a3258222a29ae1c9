package afpacket_test

import (
	"errors"
	"fmt"

	"github.com/tickwire/tickwire/link/afpacket"
)

// Opening a capture fails with a typed error that names the interface; on a
// mirror port, Promiscuous is what makes frames for other hosts arrive.
func ExampleNew() {
	_, err := afpacket.New("twa-missing0", afpacket.Config{Promiscuous: true})
	var e *afpacket.Error
	fmt.Println(errors.As(err, &e), e.Op, e.Interface)
	// Output: true open twa-missing0
}
