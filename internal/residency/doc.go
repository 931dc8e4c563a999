// Package residency keeps the pages of nodelet's own binary that only its
// start-up needed out of its resident set.
//
// Every Go package's init function runs once at start, and the kernel maps
// the code, tables and function metadata around each of them (its fault-
// around maps up to 64 KiB per fault, and a fault maps the whole of a
// large folio, which read-ahead makes up to 2 MiB): with a thousand
// packages linked in, most of the binary's code and read-only data is
// resident after init, though a running agent uses a fraction of it.
// Release drops the binary's read-only mappings from the process's page
// tables (madvise MADV_DONTNEED), marks them for random access
// (MADV_RANDOM: no read-ahead) and drops the binary's pages that no process
// maps from the page cache (POSIX_FADV_DONTNEED). What runs afterwards
// brings back the pages it touches, one page per fault.
//
// The kernel reads code ahead whatever the advice, up to the end of the
// mapping, and maps a fault's cached neighbours within the mapping too, so
// Release also cuts the code's mapping into 8 KiB chunks (once): a fault on
// code maps at most two pages. JoinCode makes the code one mapping again
// and keeps it whole, for profiling: runtime/pprof writes an entry per
// mapping into every profile.
package residency
