package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// profileDirEnv names a directory where the benchmarks save nodelet's
	// CPU and allocation profiles of their windows (the burst's start and
	// teardown). Setting it also turns on nodelet's profiling handler.
	profileDirEnv = "NODELET_BENCH_PROFILE_DIR"
	// profileChunk is the length of one CPU profile: the handler takes
	// whole seconds, so a window is saved as consecutive chunks, which
	// `go tool pprof` merges when given them all.
	profileChunk = 1
	// restWindowEnv overrides the burst's rest window (a Go duration), to
	// profile the node at rest over a whole resync period.
	restWindowEnv = "NODELET_BENCH_REST_WINDOW"
)

// restWindowFor is the burst's rest window: restWindow unless
// $NODELET_BENCH_REST_WINDOW names another.
func restWindowFor(b *testing.B) time.Duration {
	v := os.Getenv(restWindowEnv)
	if v == "" {
		return restWindow
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		b.Fatalf("$%s: %q is not a positive duration", restWindowEnv, v)
	}
	return d
}

// profilingWanted tells whether nodelet should serve /debug/pprof.
func profilingWanted() bool {
	return os.Getenv("NODELET_BENCH_PROFILE") != "" || os.Getenv(profileDirEnv) != ""
}

// windowProfile records one window of a benchmark: CPU profiles in
// profileChunk-second pieces for as long as the window lasts, and the
// allocation profile at its start and end (compare them with
// `go tool pprof -base <name>-allocs-start.pb.gz <name>-allocs-end.pb.gz`).
type windowProfile struct {
	b     *testing.B
	base  string
	dir   string
	name  string
	chunk int
	stop  chan struct{}
	done  sync.WaitGroup
}

// profileWindow starts profiling nodelet n for the window called name when
// $NODELET_BENCH_PROFILE_DIR is set; the returned stop function ends it and
// waits for the last CPU chunk. Without the variable both do nothing.
func profileWindow(b *testing.B, n *utils.Nodelet, name string) (stop func()) {
	b.Helper()
	return profileWindowChunked(b, n, name, profileChunk)
}

// profileWindowChunked is profileWindow with CPU profiles of chunk seconds:
// a quiet window takes one long profile, so that fetching profiles is not
// most of what it records.
func profileWindowChunked(b *testing.B, n *utils.Nodelet, name string, chunk int) (stop func()) {
	b.Helper()
	dir := os.Getenv(profileDirEnv)
	if dir == "" {
		return func() {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Logf("profiling %s: %v", name, err)
		return func() {}
	}
	p := &windowProfile{
		b: b, base: "http://" + n.MetricsAddr + "/debug/pprof/", dir: dir,
		name: name + "-" + time.Now().Format("150405"), chunk: max(chunk, 1), stop: make(chan struct{}),
	}
	p.save("allocs", "allocs-start")
	p.done.Add(1)
	go p.cpuLoop()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(p.stop)
			p.done.Wait()
			p.save("allocs", "allocs-end")
			b.Logf("profiles of %s saved in %s as %s-*", name, dir, p.name)
		})
	}
}

// cpuLoop takes consecutive CPU profiles until the window stops.
func (p *windowProfile) cpuLoop() {
	defer p.done.Done()
	for i := 0; ; i++ {
		select {
		case <-p.stop:
			return
		default:
		}
		p.save(fmt.Sprintf("profile?seconds=%d", p.chunk), fmt.Sprintf("cpu-%03d", i))
	}
}

// save fetches one profile from nodelet into <dir>/<name>-<suffix>.pb.gz.
func (p *windowProfile) save(path, suffix string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(p.chunk)*time.Second+30*time.Second)
	defer cancel()
	if err := fetchTo(ctx, p.base+path, filepath.Join(p.dir, p.name+"-"+suffix+".pb.gz")); err != nil {
		p.b.Logf("profiling %s: %v", p.name, err)
	}
}

func fetchTo(ctx context.Context, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return fmt.Errorf("fetching %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetching %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetching %s: %s", url, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("saving %s: %w", url, err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return fmt.Errorf("saving %s: %w", url, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("saving %s: %w", url, err)
	}
	return nil
}
