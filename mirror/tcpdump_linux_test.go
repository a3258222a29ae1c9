package mirror_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/mirror"
)

// TestTcpdumpAnyCapture captures a loopback TCP connection with tcpdump -i
// any (a genuine Linux cooked capture: LINUX_SLL, or LINUX_SLL2 with -y)
// and checks that the Assembler decodes every frame and delivers exactly the
// bytes sent, ending with the FIN. It needs root and tcpdump, and takes
// about a second.
func TestTcpdumpAnyCapture(t *testing.T) {
	tcpdump, err := exec.LookPath("tcpdump")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs tcpdump and root")
	}
	for _, dlt := range []struct {
		name string
		link uint16
	}{{"LINUX_SLL", frame.LinkTypeLinuxSLL}, {"LINUX_SLL2", frame.LinkTypeLinuxSLL2}} {
		t.Run(dlt.name, func(t *testing.T) {
			// A loaded machine can make tcpdump's kernel buffer overflow
			// (it says "N packets dropped by kernel"): such a capture is
			// taken again, up to three times.
			for attempt := 1; ; attempt++ {
				capture := func() (complete bool) {
					ln, err := net.Listen("tcp4", "127.0.0.1:0")
					if err != nil {
						t.Fatal(err)
					}
					defer ln.Close()
					port := ln.Addr().(*net.TCPAddr).Port
					out := filepath.Join(t.TempDir(), "any.pcap")
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					logPath := filepath.Join(t.TempDir(), "tcpdump.log")
					logFile, err := os.Create(logPath)
					if err != nil {
						t.Fatal(err)
					}
					defer logFile.Close()
					log := func() []byte { b, _ := os.ReadFile(logPath); return b }
					cmd := exec.CommandContext(ctx, tcpdump, "-i", "any", "-y", dlt.name, "--immediate-mode", "-U", "-n", "-s", "0", "-B", "16384",
						"-w", out, "tcp port "+strconv.Itoa(port))
					cmd.Stderr = logFile
					if err := cmd.Start(); err != nil {
						t.Fatal(err)
					}
					// tcpdump says "listening on" once its filter is in place.
					for deadline := time.Now().Add(10 * time.Second); !bytes.Contains(log(), []byte("listening on")); time.Sleep(10 * time.Millisecond) {
						if time.Now().After(deadline) {
							cmd.Process.Kill()
							cmd.Wait()
							t.Skipf("tcpdump did not start: %s", log())
						}
					}
					payload := bytes.Repeat([]byte("tickwire mirror over a cooked capture. "), 2000)
					go func() {
						c, err := ln.Accept()
						if err != nil {
							return
						}
						io.Copy(io.Discard, c)
						c.Close()
					}()
					c, err := net.Dial("tcp4", ln.Addr().String())
					if err != nil {
						t.Fatal(err)
					}
					if _, err := c.Write(payload); err != nil {
						t.Fatal(err)
					}
					c.Close()
					local := c.LocalAddr().(*net.TCPAddr)
					k := mirror.FlowKey{SrcPort: uint16(local.Port), DstPort: uint16(port)}
					copy(k.SrcIP[:], local.IP.To4())
					copy(k.DstIP[:], net.IPv4(127, 0, 0, 1).To4())
					// tcpdump writes each packet as it comes (-U): poll the file
					// until the stream is whole, for at most 10 s.
					var frames []linkFrame
					var st mirror.Stats
					var s *stream
					for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
						frames = readCapturedFrames(out)
						rec := newRecorder(t)
						a, err := mirror.New(mirror.Config{}, rec)
						if err != nil {
							t.Fatal(err)
						}
						for _, f := range frames {
							if f.link != dlt.link {
								t.Fatalf("tcpdump -y %s wrote link type %d", dlt.name, f.link)
							}
							_ = a.HandleLinkFrame(f.link, f.data, f.ts)
						}
						a.Close()
						st, s = a.Stats(), rec.streams[k]
						if s != nil && bytes.Equal(s.data, payload) && len(s.ends) == 1 && s.ends[0] == mirror.EndFIN {
							break
						}
					}
					cmd.Process.Signal(os.Interrupt)
					cmd.Wait()
					if s == nil || !bytes.Equal(s.data, payload) || len(s.gaps) != 0 {
						if m := kernelDrops.FindSubmatch(log()); m != nil && string(m[1]) != "0" {
							return false // the capture lost frames, not the Assembler
						}
						t.Fatalf("%d frames: flow %v not delivered whole (stats %+v)\n%s", len(frames), k, st, log())
					}
					if st.Malformed+st.NonTCP+st.UnsupportedLink+st.Truncated != 0 {
						t.Fatalf("frames not decoded: %+v", st)
					}
					t.Logf("%d frames, stats %+v", len(frames), st)
					return true
				}
				if capture() {
					return
				}
				if attempt == 3 {
					t.Skip("tcpdump's kernel buffer dropped packets in three captures: the machine is too loaded to test")
				}
			}
		})
	}
}

// kernelDrops finds tcpdump's count of packets its kernel buffer dropped.
var kernelDrops = regexp.MustCompile(`(\d+) packets dropped by kernel`)

// readCapturedFrames reads the frames of a capture that tcpdump may still be
// writing: a partial last record ends the list.
func readCapturedFrames(path string) []linkFrame {
	frames, _ := readFrames(path)
	return frames
}
