// Command hugepages maps N huge pages of 2 MiB (mmap MAP_HUGETLB, N the
// first argument, default 1) and writes to each, then prints "mapped N
// huge pages" and exits 0, or with "hold" as the second argument keeps
// them until it is killed; when the mapping is refused or a page cannot be
// faulted in (the hugetlb cgroup's limit), it prints why and exits 1. It
// shows whether a container may use the node's huge pages.
package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"
)

const pageSize = 2 << 20

func main() {
	n := 1
	if len(os.Args) > 1 {
		var err error
		if n, err = strconv.Atoi(os.Args[1]); err != nil || n < 1 {
			fmt.Println("usage: hugepages [pages]")
			os.Exit(2)
		}
	}
	mem, err := syscall.Mmap(-1, 0, n*pageSize, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_HUGETLB)
	if err != nil {
		fmt.Printf("mapping %d huge pages: %v\n", n, err)
		os.Exit(1)
	}
	// A page the cgroup does not allow is a SIGBUS when it is faulted in.
	debug.SetPanicOnFault(true)
	defer func() {
		if r := recover(); r != nil {
			fmt.Printf("writing to %d huge pages: %v\n", n, r)
			os.Exit(1)
		}
	}()
	for i := 0; i < n; i++ {
		mem[i*pageSize] = 1
	}
	fmt.Printf("mapped %d huge pages\n", n)
	if len(os.Args) > 2 && os.Args[2] == "hold" {
		for {
			time.Sleep(time.Hour)
		}
	}
}
