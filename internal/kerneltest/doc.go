// Package kerneltest sets up the Linux kernel as a test peer: it creates
// network namespaces that a test owns, moves links into them, and runs
// commands or Go code inside them, removing everything in t.Cleanup.
//
// Nothing here touches the host's own network: a test creates its devices
// inside a namespace (Netns.Do) or moves them there before configuring them.
//
//	a, b := kerneltest.NewNetns(t, "twl"), kerneltest.NewNetns(t, "twl") // skip unless root
//	kerneltest.Veth(t, a, "twl0", b, "twl1")
//	a.MustRun(t, "ip", "addr", "add", "10.201.0.1/24", "dev", "twl0")
//	err := b.Do(func() error { ep, err = tap.New(...); return err }) // a device made inside b
//	out, err := a.Run("ping", "-c", "1", "10.201.0.2")
//
// Tests need iproute2 (the ip command); helpers that run other tools skip
// the test when the tool is absent (RequireTool).
package kerneltest
