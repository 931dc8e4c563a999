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
	// restWindowEnv overrides the rest window of the burst and of the
	// side-by-side run (a Go duration), to profile or compare the node at
	// rest over several resync periods.
	restWindowEnv = "NODELET_BENCH_REST_WINDOW"
)

// restWindowFor is a rest window: def unless $NODELET_BENCH_REST_WINDOW
// names another.
func restWindowFor(b *testing.B, def time.Duration) time.Duration {
	v := os.Getenv(restWindowEnv)
	if v == "" {
		return def
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
// profileChunk-second pieces for as long as the window lasts, the
// allocation profile at its start and end (compare them with
// `go tool pprof -base <name>-allocs-start.pb.gz <name>-allocs-end.pb.gz`),
// and the heap and goroutine profiles at the window's highest resident
// memory (<name>-heap-peak, <name>-goroutine-peak, <name>-peak.txt).
type windowProfile struct {
	b     *testing.B
	pid   int
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
		b: b, pid: n.PID(), base: "http://" + n.MetricsAddr + "/debug/pprof/", dir: dir,
		name: name + "-" + time.Now().Format("150405"), chunk: max(chunk, 1), stop: make(chan struct{}),
	}
	p.save("allocs", "allocs-start")
	p.done.Add(2)
	go p.cpuLoop()
	go p.peakLoop()
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

// peakSampleEvery is how often peakLoop reads the resident memory, and
// peakStep how far above the highest reading so far it must be to take the
// profiles again.
const (
	peakSampleEvery = 200 * time.Millisecond
	peakStep        = 512 << 10
)

// peakLoop saves the heap and goroutine profiles each time nodelet's
// resident memory rises peakStep above its highest reading of the window,
// so that the last ones saved are those of the window's peak. The heap
// profile's in-use figures are those of the last collection before it.
func (p *windowProfile) peakLoop() {
	defer p.done.Done()
	t := time.NewTicker(peakSampleEvery)
	defer t.Stop()
	var high int64
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		m := readMemSplit(p.pid)
		if m.rss < high+peakStep {
			continue
		}
		high = m.rss
		p.save("heap", "heap-peak")
		p.save("goroutine", "goroutine-peak")
		// The text form ends with the runtime's memory statistics
		// (stacks, heap in use, its spans).
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := fetchTo(ctx, p.base+"heap?debug=1", filepath.Join(p.dir, p.name+"-heap-peak.txt")); err != nil {
			p.b.Logf("profiling %s: %v", p.name, err)
		}
		cancel()
		note := fmt.Sprintf("at %s: rss %d KiB, anonymous %d KiB, file %d KiB\n",
			time.Now().Format(time.RFC3339Nano), m.rss>>10, m.anon>>10, m.file>>10)
		if err := os.WriteFile(filepath.Join(p.dir, p.name+"-peak.txt"), []byte(note), 0o644); err != nil {
			p.b.Logf("profiling %s: %v", p.name, err)
		}
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
