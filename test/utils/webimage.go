package utils

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// WebImage is a long-running HTTP server of our own (test/images/web) on
// port 8080, with no shell: an image that runs without a command, for
// `kubectl create deployment web --image=nodelet.test/web:1.0` on a local
// cluster. It is not one of TestImages; ask for it in
// ContainerdOptions.Images.
const WebImage = "nodelet.test/web:1.0"

// webProgram is the directory of the web server's source under test/images.
const webProgram = "web"

func init() {
	recipes[WebImage] = imageRecipe{
		key:   func() (string, error) { return programKey(webProgram) },
		build: buildWeb,
	}
}

// programSource returns the source of test/images/<program>/main.go.
func programSource(program string) ([]byte, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	src, err := os.ReadFile(filepath.Join(root, "test", "images", program, "main.go"))
	if err != nil {
		return nil, fmt.Errorf("reading the %s source: %w", program, err)
	}
	return src, nil
}

func programKey(program string) (string, error) {
	src, err := programSource(program)
	if err != nil {
		return "", err
	}
	return hashOf([]byte(imageFormat), []byte(program), []byte(runtime.Version()), []byte(runtime.GOARCH), src), nil
}

func buildWeb(ctx context.Context) (v1.Image, error) {
	bin, err := compileProgram(ctx, webProgram)
	if err != nil {
		return nil, err
	}
	var layer tarLayer
	layer.dir("tmp", 0o1777)
	layer.file(webProgram, 0o755, bin)
	return assemble(layer, v1.Config{
		Entrypoint:   []string{"/" + webProgram},
		Env:          []string{"PATH=/", "PORT=8080"},
		ExposedPorts: map[string]struct{}{"8080/tcp": {}},
	})
}

// compileProgram builds test/images/<program> statically in a module of
// its own (so a go.mod being edited in the work tree cannot break it) and
// returns the binary.
func compileProgram(ctx context.Context, program string) ([]byte, error) {
	src, err := programSource(program)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "nodelet-"+program+"-build-")
	if err != nil {
		return nil, fmt.Errorf("creating the %s build directory: %w", program, err)
	}
	defer os.RemoveAll(dir)
	goMod := "module nodelet.test/" + program + "\n\ngo 1.22\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(goMod), 0o644); err != nil {
		return nil, fmt.Errorf("writing the %s go.mod: %w", program, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
		return nil, fmt.Errorf("writing the %s source: %w", program, err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("building the %s image needs the go command: %w", program, err)
	}
	cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-ldflags=-s -w", "-o", program, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH,
		"GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("compiling %s: %w\n%s", program, err, out)
	}
	bin, err := os.ReadFile(filepath.Join(dir, program))
	if err != nil {
		return nil, fmt.Errorf("reading the %s binary: %w", program, err)
	}
	return bin, nil
}
