package shm_test

import (
	"fmt"

	"github.com/tickwire/tickwire/internal/shm"
)

// Two mappings of one region: what one side stores, the other loads.
func Example() {
	host, err := shm.New(4096) // or shm.Create("/dev/shm/NAME", 4096)
	if err != nil {
		panic(err)
	}
	defer host.Close()
	device, err := host.Map()
	if err != nil {
		panic(err)
	}
	defer device.Close()

	copy(device.Bytes()[64:], "record") // a plain write ...
	device.Store32(0, 1)                // ... published by the store
	if host.Load32(0) == 1 {
		fmt.Println(string(host.Bytes()[64:70]))
	}
	// Output: record
}
