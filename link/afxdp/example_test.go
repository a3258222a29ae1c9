package afxdp_test

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/tickwire/tickwire/link/afxdp"
)

// Opening an endpoint fails with a typed error that names the interface
// and wraps the cause (here, on Linux: no such interface; elsewhere:
// ErrNotSupported).
func ExampleNew() {
	_, err := afxdp.New("twx-missing0", afxdp.Config{Addr: netip.MustParseAddr("10.0.0.2")})
	var e *afxdp.Error
	fmt.Println(errors.As(err, &e), e.Op, e.Interface)
	// Output: true open twx-missing0
}

// A capture needs a filter: AF_XDP takes the frames it captures away from
// the kernel, so there is no capture-everything default.
func ExampleNewSource() {
	_, err := afxdp.NewSource("eth1", afxdp.Config{})
	var ce *afxdp.ConfigError
	fmt.Println(errors.As(err, &ce), ce.Field)
	// Output: true Filter
}
