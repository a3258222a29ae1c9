// Package kerneltest sets up the Linux kernel as a test peer: it creates
// network namespaces that a test owns, moves links into them, and runs
// commands or Go code inside them, removing everything in t.Cleanup.
//
// Nothing here touches the host's own network: a test creates its devices
// inside a namespace (Netns.Do) or moves them there before configuring them.
//
//	kerneltest.RequireRoot(t)
//	ns := kerneltest.NewNetns(t, "twl")
//	ns.MustRun(t, "ip", "link", "set", "lo", "up")
//	out, err := ns.Run("ping", "-c", "1", "10.201.0.2")
//
// Tests need iproute2 (the ip command); helpers that run other tools skip
// the test when the tool is absent (RequireTool).
package kerneltest
