package capgen_test

import (
	"fmt"

	"github.com/tickwire/tickwire/internal/capgen"
)

// A feed is deterministic for its seed: the truth says what was sent and
// what the impairments lost.
func ExampleGenerate() {
	f, err := capgen.Generate(capgen.Options{Messages: 20, Seed: 1, Impair: capgen.Impairments{Dup: 0.5}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fl := f.Flows[0]
	fmt.Println(fl.Key(), fl.Messages, "messages,", fl.Records, "records,", len(fl.Lost), "lost ranges")
	r := f.Records[0]
	fmt.Println(r.Template, r.SeqNum, r.Start)
	// Output:
	// 10.31.0.1:9129->10.32.0.10:50000 20 messages, 87 records, 0 lost ranges
	// 5801 1 0
}
