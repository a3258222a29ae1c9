module github.com/tickwire/tickwire

go 1.26.3

require (
	github.com/gopacket/gopacket v1.7.7
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.50.0
	gvisor.dev/gvisor v0.0.0-20260905035102-160fafc42237
)

require (
	github.com/google/btree v1.1.2 // indirect
	golang.org/x/exp v0.0.0-20250711185948-6ae5c78190dc // indirect
	golang.org/x/net v0.55.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)
