package tickwire

import "syscall"

// errnoNoNet is the errno for netstack's ErrNoNet ("machine is not on the
// network", an ICMP "source host isolated" on a connection): ENONET, as
// Linux and gVisor's syserr report it.
const errnoNoNet = syscall.ENONET
