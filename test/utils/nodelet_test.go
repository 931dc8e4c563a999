package utils

import (
	"debug/elf"
	"strings"
	"testing"
)

// TestNodeletBinaryLeavesOutTemplateExecution builds nodelet as the tests
// and the benchmarks run it and looks at its symbols: neither gRPC's
// request tracing nor text/template's execution may be linked. A template
// calls methods by name through reflection, and a binary that can do that
// keeps every exported method of every type it may hold in an interface
// (88 MB instead of 60, and more of it mapped by a running nodelet). A
// dependency that starts executing templates, or a build without
// BuildTags, fails here.
func TestNodeletBinaryLeavesOutTemplateExecution(t *testing.T) {
	bin, err := NodeletBinary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	banned := []string{"golang.org/x/net/trace.", "text/template.(*state)."}
	found := map[string]string{}
	funcs := 0
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			funcs++
		}
		for _, prefix := range banned {
			if _, seen := found[prefix]; !seen && strings.HasPrefix(s.Name, prefix) {
				found[prefix] = s.Name
			}
		}
	}
	if funcs == 0 {
		t.Fatalf("%s has no function symbols to look at", bin)
	}
	for prefix, name := range found {
		t.Errorf("%s links %s… (%s, for one): build it with -tags=%s and keep template execution out of it", bin, prefix, name, BuildTags)
	}
	t.Logf("%s: %d functions", bin, funcs)
}
