// Command fastdecode decodes a file of FAST messages with a template file and
// prints one JSON object per message per line:
//
//	go run ./examples/fastdecode -templates FILE.xml [-framing raw|len32le|step] [-reset message|never] INPUT
//
// Framings: raw is concatenated FAST messages; len32le puts a 4-byte
// little-endian length before each message (mFAST's benchmark file format);
// step is the SSE STEP envelope, each message's field 96 holding one or more
// FAST messages. -reset defaults to never for raw and len32le and to "per
// STEP message" for step; -reset message resets the dictionaries (and
// forgets the previous template id) before every FAST message.
//
// Output: {"template": 3201, "name": "...", "fields": {"Name": value, ...}}
// as fast.Message.AppendJSON writes it. On an error, one line on stderr
// names the error code and the byte offset in INPUT, and the exit status is 1:
//
//	fastdecode: CODE at byte OFFSET: message
//
// OFFSET is where the failing value starts, except for SHORT: a message cut
// short by the end of the input (or of its record or STEP payload) is
// reported at the offset where that message starts. Input that ends exactly
// at a message boundary is success.
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/tickwire/tickwire/fast"
	"github.com/tickwire/tickwire/fast/sse/step"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// inputError is a failure at a byte offset of the input.
type inputError struct {
	code   string
	offset int64
	err    error
}

func (e *inputError) Error() string {
	return fmt.Sprintf("%s at byte %d: %v", e.code, e.offset, e.err)
}

func run(args []string, stdout, stderr io.Writer) (status int) {
	fs := flag.NewFlagSet("fastdecode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	templates := fs.String("templates", "", "FAST template XML file (required)")
	framing := fs.String("framing", "raw", "input framing: raw, len32le or step")
	reset := fs.String("reset", "", "dictionary reset: message or never (default never for raw and len32le, per STEP message for step)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fastdecode -templates FILE.xml [-framing raw|len32le|step] [-reset message|never] INPUT")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *templates == "" || fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	switch *framing {
	case "raw", "len32le", "step":
	default:
		fmt.Fprintf(stderr, "fastdecode: unknown framing %q\n", *framing)
		return 2
	}
	switch *reset {
	case "", "message", "never":
	default:
		fmt.Fprintf(stderr, "fastdecode: unknown reset policy %q\n", *reset)
		return 2
	}
	ts, err := fast.LoadTemplatesFile(*templates)
	if err != nil {
		fmt.Fprintf(stderr, "fastdecode: %v\n", err)
		return 1
	}
	input, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "fastdecode: %v\n", err)
		return 1
	}
	d, err := fast.NewDecoder(ts, &fast.DecoderOptions{ResetEachMessage: *reset == "message"})
	if err != nil {
		fmt.Fprintf(stderr, "fastdecode: %v\n", err)
		return 1
	}
	out := bufio.NewWriter(stdout)
	defer func() {
		// A bug must still end in one line and an exit status, not a
		// trace: the contract promises that to scripts.
		if r := recover(); r != nil {
			out.Flush()
			fmt.Fprintf(stderr, "fastdecode: INTERNAL error: %v\n", r)
			status = 3
		}
	}()
	w := &writer{out: out}
	switch *framing {
	case "raw":
		err = decodeRaw(d, input, 0, w)
	case "len32le":
		err = decodeLen32LE(d, input, w)
	case "step":
		err = decodeSTEP(d, input, *reset != "never", w)
	}
	if ferr := out.Flush(); err == nil && ferr != nil {
		fmt.Fprintf(stderr, "fastdecode: %v\n", ferr)
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "fastdecode: %v\n", err)
		return 1
	}
	return 0
}

// writer prints messages as JSON lines, reusing its buffer.
type writer struct {
	out *bufio.Writer
	buf []byte
}

func (w *writer) message(m *fast.Message) error {
	w.buf = RenderJSON(w.buf[:0], m)
	_, err := w.out.Write(w.buf)
	return err
}

// RenderJSON appends the output line for m, newline included.
func RenderJSON(dst []byte, m *fast.Message) []byte {
	return append(m.AppendJSON(dst), '\n')
}

// decodeError converts an error decoding the message that starts at byte
// base of the input into an inputError. A message cut short is reported at
// base, where it starts: the decoder's offset is where it ran out of bytes,
// which is the end of the input.
func decodeError(err error, base int64) error {
	var de *fast.DecodeError
	if errors.As(err, &de) {
		if de.Code == "SHORT" {
			return &inputError{"SHORT", base, errors.New("input ends inside a message")}
		}
		ctx := ""
		if de.TemplateID != 0 {
			ctx = fmt.Sprintf(" (template %d", de.TemplateID)
			if de.Field != "" {
				ctx += ", field " + de.Field
			}
			ctx += ")"
		}
		return &inputError{de.Code, base + int64(de.Offset), fmt.Errorf("%w%s", de.Err, ctx)}
	}
	return &inputError{"ERROR", base, err}
}

// decodeRaw decodes concatenated messages; base is the offset of b in the
// input.
func decodeRaw(d *fast.Decoder, b []byte, base int64, w *writer) error {
	var m fast.Message
	for off := 0; off < len(b); {
		n, err := d.Decode(b[off:], &m)
		if err != nil {
			return decodeError(err, base+int64(off))
		}
		if err := w.message(&m); err != nil {
			return err
		}
		off += n
	}
	return nil
}

func decodeLen32LE(d *fast.Decoder, b []byte, w *writer) error {
	var m fast.Message
	for off := 0; off < len(b); {
		if len(b)-off < 4 {
			return &inputError{"SHORT", int64(off), errors.New("input ends inside a record length")}
		}
		n := int64(binary.LittleEndian.Uint32(b[off:]))
		if n > int64(len(b)-off-4) {
			return &inputError{"SHORT", int64(off), fmt.Errorf("record of %d bytes runs past the end of the input", n)}
		}
		rec := b[off+4 : off+4+int(n)]
		used, err := d.Decode(rec, &m)
		if err != nil {
			return decodeError(err, int64(off+4))
		}
		if used != len(rec) {
			return &inputError{"FRAMING", int64(off + 4 + used), fmt.Errorf("record has %d bytes after its message", len(rec)-used)}
		}
		if err := w.message(&m); err != nil {
			return err
		}
		off += 4 + int(n)
	}
	return nil
}

func decodeSTEP(d *fast.Decoder, b []byte, resetEach bool, w *writer) error {
	p := step.NewParser(step.Config{})
	p.Feed(b)
	for {
		sm, err := p.Next()
		if err != nil {
			var se *step.Error
			if errors.As(err, &se) {
				return &inputError{"STEP", se.Offset, err}
			}
			return &inputError{"STEP", 0, err}
		}
		if sm == nil {
			break
		}
		if resetEach {
			d.Reset()
		}
		// The payload's offset in the input: it ends just before the
		// SOH that precedes "10=xxx|".
		payloadEnd := sm.Offset + int64(len(sm.Raw)) - int64(len("10=000\x01")) - 1
		base := payloadEnd - int64(len(sm.Payload))
		if err := decodeRaw(d, sm.Payload, base, w); err != nil {
			return err
		}
	}
	if n := p.Buffered(); n > 0 {
		return &inputError{"SHORT", int64(len(b) - n), errors.New("input ends inside a STEP message")}
	}
	return nil
}
