// Package memprofile turns Go's memory profiling off in the process that
// imports it, from the start of its initialization, and lets a process
// that serves heap profiles turn it back on (Enable).
//
// Go samples an allocation in every 512 KiB by default and keeps a record
// per allocating stack, never freed, found through a 1.4 MiB hash table
// whose pages become resident as records land in them: about 1.2 MiB of a
// nodelet's resident memory, for profiles that nobody can read unless the
// profiling handler is on. (Go still samples one allocation per processor
// when the rate changes, so the table's address space is reserved; its
// pages are not touched.)
//
// Go initializes, of the packages whose imports are initialized, the one
// whose import path sorts first. This package imports only the runtime, and
// its path sorts before those of the large dependencies (google.golang.org,
// k8s.io, sigs.k8s.io), so it runs before nearly every allocation of the
// process's start-up.
package memprofile
