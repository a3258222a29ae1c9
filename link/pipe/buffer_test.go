package pipe

import "gvisor.dev/gvisor/pkg/buffer"

func bufferOf(s string) buffer.Buffer { return buffer.MakeWithData([]byte(s)) }
