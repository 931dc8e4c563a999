// Command pagemap reports which pages of a running Go program's binary are
// resident, per ELF section and per Go package of the first symbol on the
// page, to find out what keeps nodelet's file pages in memory (see
// docs/benchmarks.md, "Memory"). It reads /proc/<pid>/maps and
// /proc/<pid>/pagemap, so it runs as root:
//
//	go run ./hack/pagemap -pid "$(pgrep -n nodelet)" [-top 40]
package main
