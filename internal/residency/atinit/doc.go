// Package atinit releases the binary's pages (package residency) while the
// process initializes, before the large dependencies' package inits run.
//
// Every package's init runs once, and on their own the inits of client-go,
// controller-runtime, gRPC and the rest made most of the binary resident:
// 40 MiB for `nodelet --version`, the agent's peak on a machine where the
// set-up after init had become lighter. Go initializes, of the packages
// whose imports are initialized, the one whose import path sorts first;
// this package imports only residency (the standard library and
// golang.org/x/sys/unix), so it runs before google.golang.org, k8s.io and
// sigs.k8s.io. From then on the remaining inits bring back only the pages
// they touch, and the code in chunks (residency.Release splits it).
package atinit
