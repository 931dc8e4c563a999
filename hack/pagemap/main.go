package main

import (
	"bufio"
	"debug/elf"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

const pageSize = 4096

// mapping is one line of /proc/<pid>/maps backed by the binary.
type mapping struct {
	start, end, offset uint64
}

func main() {
	pid := flag.Int("pid", 0, "process to inspect")
	top := flag.Int("top", 25, "packages to list")
	flag.Parse()
	if *pid == 0 {
		fmt.Fprintln(os.Stderr, "pagemap: -pid is required")
		os.Exit(2)
	}
	if err := run(*pid, *top, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pagemap:", err)
		os.Exit(1)
	}
}

func run(pid, top int, w io.Writer) error {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return fmt.Errorf("reading the binary's path: %w", err)
	}
	maps, err := binaryMappings(pid, exe)
	if err != nil {
		return err
	}
	resident, err := residentPages(pid, maps)
	if err != nil {
		return err
	}
	f, err := elf.Open(exe)
	if err != nil {
		return fmt.Errorf("opening %s: %w", exe, err)
	}
	defer f.Close()

	// File offset of each resident page → section, and for .text and
	// .gopclntab the package of the symbol there.
	syms, err := f.Symbols()
	if err != nil {
		return fmt.Errorf("reading symbols: %w", err)
	}
	sort.Slice(syms, func(i, j int) bool { return syms[i].Value < syms[j].Value })
	bySection := map[string]int{}
	byPkg := map[string]int{}
	sizeSection := map[string]uint64{}
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && s.Type != elf.SHT_NOBITS {
			sizeSection[s.Name] = s.Size
		}
	}
	for _, addr := range resident {
		sec := sectionOf(f, addr)
		name := "(other)"
		if sec != nil {
			name = sec.Name
		}
		bySection[name]++
		if name == ".text" || name == ".rodata" || name == ".noptrdata" || name == ".data" {
			byPkg[name+" "+packageOf(symbolAt(syms, addr))]++
		}
	}
	fmt.Fprintf(w, "binary %s: %d KiB resident of its mappings\n\n", exe, len(resident)*pageSize/1024)
	fmt.Fprintf(w, "%-18s %10s %10s\n", "section", "resident", "size")
	for _, kv := range sorted(bySection) {
		fmt.Fprintf(w, "%-18s %7d KiB %7d KiB\n", kv.k, kv.v*pageSize/1024, sizeSection[kv.k]/1024)
	}
	fmt.Fprintf(w, "\n%-70s %10s\n", "section and package of the page's first symbol", "resident")
	for i, kv := range sorted(byPkg) {
		if i == top {
			break
		}
		fmt.Fprintf(w, "%-70s %7d KiB\n", kv.k, kv.v*pageSize/1024)
	}
	return nil
}

type kv struct {
	k string
	v int
}

func sorted(m map[string]int) []kv {
	out := make([]kv, 0, len(m))
	for k, v := range m {
		out = append(out, kv{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].v > out[j].v || out[i].v == out[j].v && out[i].k < out[j].k })
	return out
}

// binaryMappings lists the mappings of exe in pid's address space.
func binaryMappings(pid int, exe string) ([]mapping, error) {
	fh, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, fmt.Errorf("reading maps: %w", err)
	}
	defer fh.Close()
	var out []mapping
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[5] != exe {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		off, err3 := strconv.ParseUint(f[2], 16, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("parsing maps line %q", sc.Text())
		}
		out = append(out, mapping{start: start, end: end, offset: off})
	}
	return out, sc.Err()
}

// residentPages returns the virtual addresses of the binary's pages that
// are present and file-backed (not copied-on-write into anonymous memory).
func residentPages(pid int, maps []mapping) ([]uint64, error) {
	fh, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return nil, fmt.Errorf("reading pagemap: %w", err)
	}
	defer fh.Close()
	var out []uint64
	buf := make([]byte, 8)
	for _, m := range maps {
		for a := m.start; a < m.end; a += pageSize {
			if _, err := fh.ReadAt(buf, int64(a/pageSize*8)); err != nil {
				return nil, fmt.Errorf("reading pagemap at %#x: %w", a, err)
			}
			e := binary.LittleEndian.Uint64(buf)
			present := e&(1<<63) != 0
			filePage := e&(1<<61) != 0
			if present && filePage {
				out = append(out, a)
			}
		}
	}
	return out, nil
}

func sectionOf(f *elf.File, addr uint64) *elf.Section {
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && addr >= s.Addr && addr < s.Addr+s.Size {
			return s
		}
	}
	return nil
}

// symbolAt is the last symbol starting at or before addr.
func symbolAt(syms []elf.Symbol, addr uint64) string {
	i := sort.Search(len(syms), func(i int) bool { return syms[i].Value > addr })
	if i == 0 {
		return ""
	}
	return syms[i-1].Name
}

// packageOf is the Go package path of a symbol name such as
// "k8s.io/api/core/v1.(*Pod).Marshal" or "type:*k8s.io/api/core/v1.Pod".
func packageOf(sym string) string {
	sym = strings.TrimPrefix(sym, "type:")
	sym = strings.TrimLeft(sym, "*")
	if sym == "" {
		return "(none)"
	}
	slash := strings.LastIndex(sym, "/")
	dot := strings.Index(sym[slash+1:], ".")
	if dot < 0 {
		return sym
	}
	return sym[:slash+1+dot]
}
