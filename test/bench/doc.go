// Package bench measures nodelet end to end against the real things it
// talks to: a private containerd, an envtest API server and the nodelet
// binary as a process (all from test/utils). Each benchmark starts and tears
// down its own environment, runs one full measurement per b.N iteration, and
// prints its numbers as a table next to the targets, together with the floor
// the container runtime itself sets on this machine (the same work done
// straight through the CRI). Missed targets are marked, not failed: these are
// measurements, run with `make bench`, never part of `make test`. The package
// holds benchmarks and table tests of their pure helpers only, so `go test`
// without -bench starts nothing here.
package bench
