package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nodelet/nodelet/test/utils"
)

// productRoots are the directories whose every Go package the layout table
// names by its path. Under test/, the table's "test/" row names each
// top-level directory that holds Go code.
var productRoots = []string{"api", "cmd", "internal", "pkg"}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// layoutTable returns the first and second columns of the rows of the table
// under "## Layout" in docs/architecture.md, by the first column's
// backquoted paths.
func layoutTable(t *testing.T, root string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Layout"
		case in && strings.HasPrefix(line, "| `"):
			cells := strings.Split(line, " | ")
			if len(cells) < 2 {
				t.Fatalf("layout row without a description: %q", line)
			}
			for _, m := range codeSpan.FindAllStringSubmatch(cells[0], -1) {
				rows[m[1]] = cells[1]
			}
		}
	}
	if len(rows) == 0 {
		t.Fatal(`docs/architecture.md has no table under "## Layout"`)
	}
	return rows
}

// goDirs returns the directories under root/dir (relative to root) that hold
// a .go file, leaving out testdata trees as the go command does.
func goDirs(t *testing.T, root, dir string) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".go") {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			if !slices.Contains(dirs, rel) {
				dirs = append(dirs, rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

func TestLayoutTableNamesEveryPackage(t *testing.T) {
	root, err := utils.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	rows := layoutTable(t, root)

	for _, r := range productRoots {
		for _, dir := range goDirs(t, root, r) {
			if _, ok := rows[dir]; !ok {
				t.Errorf("docs/architecture.md's layout table does not name package %s", dir)
			}
		}
	}
	testRow, ok := rows["test/"]
	if !ok {
		t.Fatal(`docs/architecture.md's layout table has no "test/" row`)
	}
	var named []string
	for _, m := range codeSpan.FindAllStringSubmatch(testRow, -1) {
		named = append(named, m[1])
	}
	for _, dir := range goDirs(t, root, "test") {
		top := strings.Split(filepath.ToSlash(dir), "/")[1]
		if !slices.Contains(named, top) {
			t.Errorf(`docs/architecture.md's "test/" row does not name %s (holding %s)`, top, dir)
		}
	}
	for _, top := range named {
		if _, err := os.Stat(filepath.Join(root, "test", top)); err != nil {
			t.Errorf(`docs/architecture.md's "test/" row names %s, which does not exist`, top)
		}
	}

	for path := range rows {
		if _, err := os.Stat(filepath.Join(root, path)); err != nil {
			t.Errorf("docs/architecture.md's layout table names %s, which does not exist", path)
		}
	}
}
