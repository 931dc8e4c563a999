// Command pause is the sandbox ("infra") container of the test images: it
// holds a pod's namespaces open and does nothing else. It sleeps until SIGTERM
// or SIGINT and, being PID 1 of the pod when the PID namespace is shared,
// reaps every child that is reparented to it.
//
// It is built statically (CGO_ENABLED=0) by test/utils and is the only file
// of the nodelet.test/pause image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig == syscall.SIGCHLD {
			reap()
			continue
		}
		os.Exit(0)
	}
}

// reap collects every exited child without blocking, so none stays a zombie.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
