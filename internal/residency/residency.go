package residency

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// region is a mapping of the binary that Release may drop.
type region struct {
	start, end uint64
	// exec tells a mapping of code.
	exec bool
}

// codeChunk is the length of the mappings Release cuts the binary's code
// into. The kernel bounds both a fault's read-ahead and its fault-around
// (the cached neighbours a fault maps too) by the mapping, and reads code
// ahead whatever the advice (Linux 6.18 reads read_ahead_kb from the
// faulting page of an executable mapping, MADV_RANDOM or not), so in one
// mapping of all the code each fault mapped up to 64 KiB of it. In chunks
// of 8 KiB a fault maps at most two pages. Each chunk is a kernel VMA of
// about 200 bytes: about 3,500 of them for nodelet's 28 MiB of code.
const codeChunk = 8 << 10

// code records whether Release splits the code (until JoinCode) and
// whether it already has.
var code struct {
	sync.Mutex
	whole, split bool
}

// Release drops the running binary's read-only mappings (code, read-only
// data, the function tables) from the resident set and returns how many
// bytes of mappings it advised. Writable mappings (the binary's data and
// bss, whose contents live only in memory) are never touched.
//
// It also marks those mappings for random access (MADV_RANDOM: a fault
// reads the one page it needs, no read-ahead) and drops the binary's pages
// that no process maps from the page cache (POSIX_FADV_DONTNEED), so that
// what runs afterwards brings back single pages. Read-ahead fills the page
// cache with large folios, up to 2 MiB, and a fault maps the whole folio:
// 85 reads one MiB apart in the binary made 56 MiB resident after
// read-ahead, and 340 KiB when the pages came in one by one.
func Release() (int64, error) {
	regions, err := selfRegions()
	if err != nil {
		return 0, err
	}
	var advised int64
	code.Lock()
	defer code.Unlock()
	for _, r := range regions {
		if r.exec && !code.whole && !code.split {
			if err := splitCode(r, max(codeChunk, uint64(os.Getpagesize()))); err != nil {
				return advised, err
			}
		}
		// The addresses come from the kernel, not from Go memory: a raw
		// system call, with no Go pointer made of them.
		for _, advice := range []uintptr{unix.MADV_RANDOM, unix.MADV_DONTNEED} {
			if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(r.start), uintptr(r.end-r.start), advice); errno != 0 {
				return advised, fmt.Errorf("releasing %#x-%#x: %w", r.start, r.end, errno)
			}
		}
		advised += int64(r.end - r.start)
	}
	if !code.whole {
		code.split = true
	}
	if err := dropCached("/proc/self/exe"); err != nil {
		return advised, err
	}
	return advised, nil
}

// JoinCode makes the binary's code one mapping again, and Release leave
// it whole from then on. Profiles need it: runtime/pprof writes an entry
// for every mapping of the binary into each profile, reading the binary's
// build ID for each, and for the code in chunks one CPU profile allocated
// tens of megabytes and took as much CPU time as what it recorded.
func JoinCode() error {
	code.Lock()
	defer code.Unlock()
	code.whole = true
	if !code.split {
		return nil
	}
	regions, err := selfRegions()
	if err != nil {
		return err
	}
	for _, r := range regions {
		if !r.exec {
			continue
		}
		// Clearing the flag on every chunk lets the kernel merge them.
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(r.start), uintptr(r.end-r.start), unix.MADV_DODUMP); errno != 0 {
			return fmt.Errorf("joining the code mapping %#x-%#x: %w", r.start, r.end, errno)
		}
	}
	code.split = false
	return nil
}

// selfRegions returns the running binary's read-only mappings.
func selfRegions() ([]region, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/exe", &st); err != nil {
		return nil, fmt.Errorf("reading the binary's inode: %w", err)
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil, fmt.Errorf("reading the process's mappings: %w", err)
	}
	defer f.Close()
	return binaryRegions(f, uint64(st.Dev), st.Ino)
}

// splitCode cuts the code mapping r into mappings of chunk bytes: every
// other chunk is marked MADV_DONTDUMP, a flag that only core dumps read
// (which leave out a binary's code anyway), and the kernel does not merge
// neighbours whose flags differ. Release splits the code once.
func splitCode(r region, chunk uint64) error {
	for start := r.start + chunk; start < r.end; start += 2 * chunk {
		end := min(start+chunk, r.end)
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_DONTDUMP); errno != 0 {
			return fmt.Errorf("splitting the code mapping at %#x: %w", start, errno)
		}
	}
	return nil
}

// dropCached drops the pages of the file at path that no process maps from
// the page cache.
func dropCached(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening the binary: %w", err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("dropping the binary's cached pages: %w", err)
	}
	return nil
}

// binaryRegions reads /proc/self/maps text and returns the mappings of the
// file with device dev and inode ino that are neither writable nor shared.
// The path is not compared: a binary replaced on disk while running shows
// as "(deleted)", its inode is still the one mapped. Contiguous mappings of
// the same kind (the chunks splitCode made) come back as one region.
func binaryRegions(maps io.Reader, dev, ino uint64) ([]region, error) {
	var out []region
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		// address perms offset dev inode [path]
		if len(f) < 5 {
			continue
		}
		perms := f[1]
		if len(perms) != 4 || perms[1] == 'w' || perms[3] != 'p' {
			continue
		}
		if n, err := strconv.ParseUint(f[4], 10, 64); err != nil || n != ino || n == 0 {
			continue
		}
		if d, ok := parseDev(f[3]); !ok || d != dev {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			return nil, fmt.Errorf("parsing mapping %q", line)
		}
		start, err := strconv.ParseUint(lo, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("parsing mapping %q: %w", line, err)
		}
		end, err := strconv.ParseUint(hi, 16, 64)
		if err != nil || end <= start {
			return nil, fmt.Errorf("parsing mapping %q", line)
		}
		exec := perms[2] == 'x'
		if n := len(out); n > 0 && out[n-1].end == start && out[n-1].exec == exec {
			out[n-1].end = end
			continue
		}
		out = append(out, region{start: start, end: end, exec: exec})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the process's mappings: %w", err)
	}
	return out, nil
}

// parseDev turns maps' "major:minor" (hex) into the device number stat
// reports.
func parseDev(s string) (uint64, bool) {
	maj, mnr, ok := strings.Cut(s, ":")
	if !ok {
		return 0, false
	}
	ma, err1 := strconv.ParseUint(maj, 16, 32)
	mi, err2 := strconv.ParseUint(mnr, 16, 32)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return unix.Mkdev(uint32(ma), uint32(mi)), true
}
