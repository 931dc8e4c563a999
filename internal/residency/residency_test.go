package residency

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestBinaryRegions(t *testing.T) {
	maps := `00400000-01713000 r-xp 00000000 fe:01 1234 /usr/local/bin/nodelet
01713000-02bcf000 r--p 01313000 fe:01 1234 /usr/local/bin/nodelet
02bcf000-02bd1000 r--p 027cd000 fe:01 1234 /usr/local/bin/nodelet
02bcf000-02c40000 rw-p 027cf000 fe:01 1234 /usr/local/bin/nodelet
02c40000-02c90000 rw-p 00000000 00:00 0
03000000-03001000 r--s 00000000 fe:01 1234 /usr/local/bin/nodelet
04000000-04001000 r--p 00000000 fe:01 99 /usr/lib/libc.so.6
05000000-05001000 r-xp 00000000 fe:02 1234 /other/device/same/inode
7f0000000000-7f0000001000 r-xp 00000000 fe:01 1234 /usr/local/bin/nodelet (deleted)
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
garbage line
`
	got, err := binaryRegions(strings.NewReader(maps), unix.Mkdev(0xfe, 0x01), 1234)
	if err != nil {
		t.Fatal(err)
	}
	want := []region{
		{0x00400000, 0x01713000, true},
		{0x01713000, 0x02bd1000, false},
		{0x7f0000000000, 0x7f0000001000, true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("binaryRegions = %#v, want %#v (writable, shared, other files and devices left out, contiguous mappings of a kind joined)", got, want)
	}
	// The code in chunks, as Release leaves it, is one region again.
	chunks := `00400000-00402000 r-xp 00000000 fe:01 1234 /usr/local/bin/nodelet
00402000-00404000 r-xp 00002000 fe:01 1234 /usr/local/bin/nodelet
00404000-00405000 r-xp 00004000 fe:01 1234 /usr/local/bin/nodelet
00405000-00406000 r--p 00005000 fe:01 1234 /usr/local/bin/nodelet
`
	got, err = binaryRegions(strings.NewReader(chunks), unix.Mkdev(0xfe, 0x01), 1234)
	if err != nil {
		t.Fatal(err)
	}
	if want := []region{{0x00400000, 0x00405000, true}, {0x00405000, 0x00406000, false}}; !reflect.DeepEqual(got, want) {
		t.Errorf("binaryRegions of split code = %#v, want %#v", got, want)
	}
	if _, err := binaryRegions(strings.NewReader("zz-01 r-xp 0 fe:01 1234 /x\n"), unix.Mkdev(0xfe, 0x01), 1234); err == nil {
		t.Error("binaryRegions accepted an unparsable address")
	}
}

// rssFile is the test process's resident file pages in KiB.
func rssFile(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, err := strconv.Atoi(strings.Fields(v)[0])
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

func TestReleaseDropsResidentPagesAndKeepsRunning(t *testing.T) {
	before := rssFile(t)
	advised, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	if advised == 0 {
		t.Fatal("Release found no mapping of the test binary")
	}
	after := rssFile(t)
	// The test binary's code, tables and read-only data were resident
	// after init; what the test touches since comes back, a fraction.
	if after >= before {
		t.Errorf("RssFile %d KiB after Release, %d KiB before: want fewer", after, before)
	}
	// Code and data still work: the pages come back from the file.
	var sb strings.Builder
	for i := range 1000 {
		sb.WriteString(strconv.Itoa(i))
	}
	if len(sb.String()) != 2890 {
		t.Errorf("computed %d bytes after Release, want 2890", len(sb.String()))
	}
	t.Logf("RssFile %d KiB → %d KiB (%d KiB of mappings advised)", before, after, advised/1024)
}

// After Release the binary's read-only mappings read no more than the page
// a fault needs: the kernel shows them with the "rr" (random read) flag.
func TestReleaseMarksTheBinaryForRandomAccess(t *testing.T) {
	if _, err := Release(); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &st); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	ino := strconv.FormatUint(st.Ino, 10)
	marked, readOnly := 0, 0
	var inBinary, writable bool
	for line := range strings.SplitSeq(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && strings.Contains(f[0], "-") && len(f[1]) == 4 {
			inBinary, writable = f[4] == ino, f[1][1] == 'w'
			continue
		}
		if flags, ok := strings.CutPrefix(line, "VmFlags:"); ok && inBinary && !writable {
			readOnly++
			if slices.Contains(strings.Fields(flags), "rr") {
				marked++
			}
		}
	}
	if readOnly == 0 || marked != readOnly {
		t.Errorf("%d of the binary's %d read-only mappings marked for random access, want all", marked, readOnly)
	}
}

// After Release the binary's code is mapped in chunks of codeChunk, so a
// fault's read-ahead and fault-around stay within one chunk; the code
// still runs.
// codeMappings returns how many mappings of the test binary hold code,
// their bytes in all, and the longest.
func codeMappings(t *testing.T) (n, bytes, longest uint64) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &st); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	ino := strconv.FormatUint(st.Ino, 10)
	for line := range strings.SplitSeq(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[4] != ino || f[1] != "r-xp" {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("parsing %q", line)
		}
		n++
		bytes += end - start
		longest = max(longest, end-start)
	}
	return n, bytes, longest
}

func TestReleaseSplitsTheCode(t *testing.T) {
	for range 2 {
		if _, err := Release(); err != nil {
			t.Fatal(err)
		}
	}
	chunk := max(codeChunk, uint64(os.Getpagesize()))
	code, bytes, longest := codeMappings(t)
	if longest > chunk {
		t.Errorf("a code mapping is %d bytes, want at most %d", longest, chunk)
	}
	if code < 2 || bytes/chunk > code {
		t.Errorf("the binary's %d bytes of code in %d mappings, want one per %d bytes", bytes, code, chunk)
	}
	if s := strconv.Itoa(12345); s != "12345" {
		t.Errorf("code after the split computed %q", s)
	}
}

func TestJoinCode(t *testing.T) {
	t.Cleanup(func() {
		code.Lock()
		code.whole = false
		code.Unlock()
	})
	if _, err := Release(); err != nil {
		t.Fatal(err)
	}
	chunk := max(codeChunk, uint64(os.Getpagesize()))
	if n, _, _ := codeMappings(t); n < 2 {
		t.Fatalf("the code is in %d mappings after Release, want it split", n)
	}
	if err := JoinCode(); err != nil {
		t.Fatal(err)
	}
	n, bytes, longest := codeMappings(t)
	if longest <= chunk || n > 2 {
		t.Errorf("after JoinCode the binary's %d bytes of code are in %d mappings (longest %d bytes), want one", bytes, n, longest)
	}
	if _, err := Release(); err != nil {
		t.Fatal(err)
	}
	if n2, _, _ := codeMappings(t); n2 != n {
		t.Errorf("Release after JoinCode split the code again: %d mappings, was %d", n2, n)
	}
	if s := strconv.Itoa(54321); s != "54321" {
		t.Errorf("code after the join computed %q", s)
	}
}

func TestDropCachedEvictsAFilesPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	cached := func() int {
		t.Helper()
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		m, err := unix.Mmap(int(f.Fd()), 0, 1<<20, unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = unix.Munmap(m) }()
		vec := make([]byte, (1<<20)/os.Getpagesize())
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			t.Fatal(errno)
		}
		n := 0
		for _, v := range vec {
			n += int(v & 1)
		}
		return n
	}
	// Written data is dirty; dropping it needs it written back first.
	unix.Sync()
	if before := cached(); before == 0 {
		t.Skip("the file's pages are not in the page cache after reading it")
	}
	if err := dropCached(path); err != nil {
		t.Fatal(err)
	}
	if after := cached(); after != 0 {
		t.Errorf("%d pages of the file cached after dropCached, want 0", after)
	}
}
