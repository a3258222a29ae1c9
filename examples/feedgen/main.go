// Command feedgen writes a synthetic Shanghai Stock Exchange Level-2 feed as a
// pcap file, for tests, benchmarks and the mirrorfeed demo:
//
//	go run ./examples/feedgen -o feed.pcap -messages 1000 -seed 1 \
//		[-loss P -reorder P -dup P -overlap P -vlan ID -flows K -mss N -wrap]
//
// The capture holds K TCP connections (handshake, data, close) from an
// exchange gateway 10.31.0.1:9129 to clients 10.32.0.x:5000x, each carrying
// one channel of STEP messages with 1 to 8 FAST-encoded UA3201 trades or
// UA5801 orders, segmented at MSS 1408. The impairments are per-segment
// probabilities of what a mirror port does: lose a segment for good, reorder
// it, duplicate it, or add a retransmission overlapping it with the same
// bytes. The same seed gives the same file.
//
// Beside the capture it writes the truth, FILE.truth.jsonl (or -truth; -truth -
// writes none). First one JSON line per record sent, in stream order per flow:
//
//	{"type":"record","flow":"10.31.0.1:9129->10.32.0.10:50000","seq":1,"category":58,
//	 "category_seq":1,"start":0,"end":187,"index":0,"template":5801,
//	 "fields":{"OrderIndex":1,"OrderChannel":1,"SecurityID":"600000",...}}
//
// flow is the data direction (server to client) as mirror.FlowKey prints it;
// seq, category and category_seq are the STEP fields 34, 10142 and 10072 of
// the message carrying the record; [start, end) is that message's byte range
// in the flow's stream (offset 0 is the byte after the server's SYN, as in
// mirror and in mirrorfeed -raw); index is the record's position in the
// message; fields are the template's fields, prices and quantities as
// integers with their implied decimals (price 3, quantity 3, money 5), times
// as HHMMSSss. Then one line per flow:
//
//	{"type":"flow","flow":"...","channel":1,"stream_bytes":83021,"messages":400,
//	 "records":1790,"lost":[{"offset":40128,"length":1408}]}
//
// where lost lists the stream ranges that no captured segment covers ([] when
// none): a record whose [start, end) meets one cannot be recovered from the
// capture; every other record can.
//
// It ends with a summary line on stdout: frames, flows, messages, records,
// stream bytes, the bytes lost in TCP gaps (the sum of the lost ranges), the
// STEP messages those ranges touch and the STEP sequence gaps (breaks in a
// category's 10072 numbers) a decoder of the capture reports for them, as
// package feed's Handler.TCPGap and Handler.SequenceGap would.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/tickwire/tickwire/internal/capgen"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("feedgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "output pcap `file` (required)")
	truth := fs.String("truth", "", "truth `file` (default: the pcap name + .truth.jsonl; - for none)")
	var opt capgen.Options
	fs.IntVar(&opt.Messages, "messages", 1000, "STEP messages in all, spread over the flows")
	fs.Uint64Var(&opt.Seed, "seed", 1, "random seed: the same seed gives the same file")
	fs.IntVar(&opt.Flows, "flows", 1, "TCP connections, one channel each")
	fs.IntVar(&opt.MSS, "mss", capgen.DefaultMSS, "TCP maximum segment size")
	vlan := fs.Uint("vlan", 0, "802.1Q VLAN `ID` for every frame (0: untagged)")
	fs.Float64Var(&opt.Impair.Loss, "loss", 0, "probability that a data segment is lost for good")
	fs.Float64Var(&opt.Impair.Reorder, "reorder", 0, "probability that a data segment is delayed behind 1 to 3 others")
	fs.Float64Var(&opt.Impair.Dup, "dup", 0, "probability that a data segment is captured twice")
	fs.Float64Var(&opt.Impair.Overlap, "overlap", 0, "probability of an extra retransmission overlapping a segment and the next (same bytes)")
	fs.BoolVar(&opt.WrapISN, "wrap", false, "start sequence numbers just below 2^32 so they wrap")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *out == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "feedgen: -o FILE is required, and no other arguments")
		fs.Usage()
		return 2
	}
	if *vlan > 4094 {
		fmt.Fprintf(stderr, "feedgen: VLAN ID %d: want 0 to 4094\n", *vlan)
		return 2
	}
	opt.VLAN = uint16(*vlan)
	if *truth == "" {
		*truth = *out + ".truth.jsonl"
	}
	f, err := capgen.Generate(opt)
	if err != nil {
		fmt.Fprintf(stderr, "feedgen: %v\n", err)
		return 2
	}
	if err := writeFile(*out, f.WritePcap); err != nil {
		fmt.Fprintf(stderr, "feedgen: %v\n", err)
		return 1
	}
	if *truth != "-" {
		if err := writeFile(*truth, f.WriteTruth); err != nil {
			fmt.Fprintf(stderr, "feedgen: %v\n", err)
			return 1
		}
	}
	var stream, lost uint64
	var trades, orders, lostMessages, seqGaps int
	for fi, fl := range f.Flows {
		stream += fl.StreamBytes
		for _, r := range fl.Lost {
			lost += r.Length
		}
		seqGaps += len(f.SequenceGaps(fi))
	}
	for i := range f.Records {
		r := &f.Records[i]
		if r.Trade != nil {
			trades++
		} else {
			orders++
		}
		if r.Index == 0 && !f.Recoverable(r) {
			lostMessages++
		}
	}
	fmt.Fprintf(stdout, "feedgen: %s: %d frames, %d flows, %d messages, %d records (%d trades, %d orders), %d stream bytes, "+
		"%d bytes lost in TCP gaps, %d STEP messages lost (%d sequence gaps); truth in %s\n",
		*out, len(f.Frames), len(f.Flows), opt.Messages, len(f.Records), trades, orders, stream,
		lost, lostMessages, seqGaps, *truth)
	return 0
}

// writeFile creates name and fills it with write, reporting the first error
// of writing, flushing or closing.
func writeFile(name string, write func(io.Writer) error) error {
	file, err := os.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(file, 1<<20)
	err = write(w)
	err = errors.Join(err, w.Flush(), file.Close())
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}
