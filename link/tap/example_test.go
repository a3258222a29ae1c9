package tap_test

import (
	"fmt"
	"net/netip"

	"github.com/tickwire/tickwire/link/tap"
)

// Create tw0, give the kernel side 10.201.0.1/24, and hand the endpoint to
// a stack. Needs root, so it is compiled but not run by go test.
func Example() {
	ep, err := tap.New(tap.Config{Name: "tw0", Host: netip.MustParsePrefix("10.201.0.1/24")})
	if err != nil {
		fmt.Println(err) // e.g. "operation not permitted" without CAP_NET_ADMIN
		return
	}
	defer ep.Close() // removes tw0, which New created
	// s, err := tickwire.New(tickwire.Config{Link: ep, MAC: ep.MAC(), Addr: netip.MustParsePrefix("10.201.0.2/24")})
	fmt.Println(ep.Name(), ep.MTU(), ep.Created())
}
