package checkpoint

import (
	"github.com/nodelet/nodelet/internal/metrics"

	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	clocktesting "k8s.io/utils/clock/testing"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

func newTestStore(t *testing.T) (*FileStore, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "checkpoints")
	s, err := NewFileStore(dir, WithClock(clocktesting.NewFakePassiveClock(testNow)))
	if err != nil {
		t.Fatalf("NewFileStore: %v", err)
	}
	return s, dir
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func assertMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode().Perm(); got != want {
		t.Errorf("mode of %s = %v, want %v", path, got, want)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func histogramCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

func TestFileStoreLifecycle(t *testing.T) {
	s, dir := newTestStore(t)
	assertMode(t, dir, 0o700)

	keys, err := s.ListCheckpoints()
	if err != nil || len(keys) != 0 {
		t.Fatalf("ListCheckpoints of a new store = %v, %v; want none", keys, err)
	}
	writes := histogramCount(t, metrics.CheckpointWriteDuration)
	want := podState{Attempt: 1, Phase: "Pending", Restarts: map[string]int{"app": 0}}
	for _, key := range []string{"pod-b", "pod-a"} {
		if err := s.CreateCheckpoint(key, NewData(want)); err != nil {
			t.Fatalf("CreateCheckpoint(%q): %v", key, err)
		}
		assertMode(t, filepath.Join(dir, key), 0o600)
	}
	if got := histogramCount(t, metrics.CheckpointWriteDuration) - writes; got != 2 {
		t.Errorf("write duration samples = %d, want 2", got)
	}
	if keys, err = s.ListCheckpoints(); err != nil || !slices.Equal(keys, []string{"pod-a", "pod-b"}) {
		t.Errorf("ListCheckpoints = %v, %v; want [pod-a pod-b]", keys, err)
	}

	got := &Data[podState]{}
	if err := s.GetCheckpoint("pod-a", got); err != nil {
		t.Fatalf("GetCheckpoint: %v", err)
	}
	if !reflect.DeepEqual(got.Value, want) {
		t.Errorf("GetCheckpoint = %+v, want %+v", got.Value, want)
	}

	// Overwrite replaces the value.
	want.Attempt = 2
	if err := s.CreateCheckpoint("pod-a", NewData(want)); err != nil {
		t.Fatal(err)
	}
	if err := s.GetCheckpoint("pod-a", got); err != nil || got.Value.Attempt != 2 {
		t.Errorf("GetCheckpoint after overwrite = %+v, %v; want attempt 2", got.Value, err)
	}

	for range 2 { // Removing twice is not an error.
		if err := s.RemoveCheckpoint("pod-a"); err != nil {
			t.Errorf("RemoveCheckpoint: %v", err)
		}
	}
	if err := s.GetCheckpoint("pod-a", got); !errors.Is(err, ErrCheckpointNotFound) {
		t.Errorf("GetCheckpoint after remove = %v, want ErrCheckpointNotFound", err)
	}
	if keys, _ = s.ListCheckpoints(); !slices.Equal(keys, []string{"pod-b"}) {
		t.Errorf("ListCheckpoints after remove = %v, want [pod-b]", keys)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"pod-b"}) {
		t.Errorf("directory holds %v, want only pod-b", names)
	}
}

func TestFileStoreNotFound(t *testing.T) {
	s, dir := newTestStore(t)
	err := s.GetCheckpoint("missing", &Data[podState]{})
	if !errors.Is(err, ErrCheckpointNotFound) {
		t.Fatalf("GetCheckpoint = %v, want ErrCheckpointNotFound", err)
	}
	if errors.Is(err, ErrCorruptCheckpoint) {
		t.Errorf("%v matches ErrCorruptCheckpoint", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `"missing"`) || !strings.Contains(msg, dir) {
		t.Errorf("error %q does not name the key and the directory", msg)
	}
}

func TestFileStoreInvalidKeys(t *testing.T) {
	s, dir := newTestStore(t)
	parent := filepath.Dir(dir)
	before := dirNames(t, parent)
	for _, key := range []string{
		"", ".", "..", "../x", "../../etc/passwd", "a/b", "/abs", `a\b`, `..\x`, ".hidden",
		"a\x00b", "new\nline", "sp ace", "tab\t", "ü", "a:b", "a*", "x.corrupt-1",
		strings.Repeat("a", MaxKeyLength+1), strings.Repeat("a", 4096),
	} {
		t.Run(strconv.Quote(key), func(t *testing.T) {
			if err := ValidateKey(key); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("ValidateKey = %v, want ErrInvalidKey", err)
			}
			if err := s.CreateCheckpoint(key, NewData(1)); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("CreateCheckpoint = %v, want ErrInvalidKey", err)
			}
			if err := s.GetCheckpoint(key, &Data[int]{}); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("GetCheckpoint = %v, want ErrInvalidKey", err)
			}
			if err := s.RemoveCheckpoint(key); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("RemoveCheckpoint = %v, want ErrInvalidKey", err)
			}
		})
	}
	if got := dirNames(t, parent); !slices.Equal(got, before) {
		t.Errorf("parent directory changed from %v to %v", before, got)
	}
	if got := dirNames(t, dir); len(got) != 0 {
		t.Errorf("store directory holds %v, want nothing", got)
	}
}

func TestValidKeys(t *testing.T) {
	s, _ := newTestStore(t)
	for _, key := range []string{
		"a", "pod-0f3c2a", "ns_name_5d0e2f4b-8b9a-4c1e-9d7a-1f2e3d4c5b6a", "a..b", "a.", "x.tmp-1",
		"Z9", strings.Repeat("k", MaxKeyLength),
	} {
		if err := ValidateKey(key); err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil", key, err)
		}
		if err := s.CreateCheckpoint(key, NewData(key)); err != nil {
			t.Errorf("CreateCheckpoint(%q) = %v", key, err)
		}
		d := &Data[string]{}
		if err := s.GetCheckpoint(key, d); err != nil || d.Value != key {
			t.Errorf("GetCheckpoint(%q) = %q, %v", key, d.Value, err)
		}
	}
}

func TestFileStoreCorrupt(t *testing.T) {
	valid := string(envelopeBytes(1, `{"attempt":1}`))
	tests := []struct {
		name     string
		contents string
		dir      bool // a directory where the file should be
	}{
		{name: "empty file", contents: ""},
		{name: "not JSON", contents: "{not json"},
		{name: "binary garbage", contents: "\x00\xff\xfe\x01"},
		{name: "truncated", contents: valid[:len(valid)/2]},
		{name: "truncated by one byte", contents: valid[:len(valid)-1]},
		{name: "checksum mismatch", contents: strings.Replace(valid, `"attempt":1`, `"attempt":2`, 1)},
		{name: "data does not fit the type", contents: string(envelopeBytes(1, `{"attempt":[]}`))},
		{name: "a directory", dir: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, dir := newTestStore(t)
			path := filepath.Join(dir, "pod")
			if tt.dir {
				if err := os.Mkdir(path, 0o700); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(path, []byte(tt.contents), 0o644); err != nil {
				t.Fatal(err)
			}
			corrupt := counterValue(t, metrics.CheckpointCorrupt)

			err := s.GetCheckpoint("pod", &Data[podState]{})
			if !errors.Is(err, ErrCorruptCheckpoint) {
				t.Fatalf("GetCheckpoint = %v, want ErrCorruptCheckpoint", err)
			}
			var cerr *CorruptCheckpointError
			if !errors.As(err, &cerr) {
				t.Fatalf("GetCheckpoint = %T, want *CorruptCheckpointError", err)
			}
			wantQuarantine := path + ".corrupt-" + strconv.FormatInt(testNow.UnixNano(), 10)
			if cerr.Key != "pod" || cerr.Path != path || cerr.QuarantinePath != wantQuarantine {
				t.Errorf("error = %+v, want key pod, path %s, quarantined to %s", cerr, path, wantQuarantine)
			}
			if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, wantQuarantine) {
				t.Errorf("error %q names neither the file nor where it went", msg)
			}
			if got := counterValue(t, metrics.CheckpointCorrupt) - corrupt; got != 1 {
				t.Errorf("corrupt counter rose by %v, want 1", got)
			}
			if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("corrupt file still at %s: %v", path, err)
			}
			if !tt.dir {
				assertMode(t, wantQuarantine, 0o600)
				if b, err := os.ReadFile(wantQuarantine); err != nil || string(b) != tt.contents {
					t.Errorf("quarantined file = %q, %v; want the corrupt contents", b, err)
				}
			}
			if keys, err := s.ListCheckpoints(); err != nil || len(keys) != 0 {
				t.Errorf("ListCheckpoints = %v, %v; want nothing: quarantined files are not listed", keys, err)
			}
			if err := s.GetCheckpoint("pod", &Data[podState]{}); !errors.Is(err, ErrCheckpointNotFound) {
				t.Errorf("GetCheckpoint after quarantine = %v, want ErrCheckpointNotFound", err)
			}

			// The caller rebuilds; a second corruption in the same clock
			// tick does not overwrite the first quarantined file.
			if err := s.CreateCheckpoint("pod", NewData(podState{Attempt: 1})); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte("again"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := s.GetCheckpoint("pod", &Data[podState]{}); !errors.As(err, &cerr) || cerr.QuarantinePath != wantQuarantine+"-1" {
				t.Errorf("second corruption = %v, want it moved to %s-1", err, wantQuarantine)
			}
			if keys, _ := s.ListCheckpoints(); len(keys) != 0 {
				t.Errorf("ListCheckpoints = %v, want nothing", keys)
			}
		})
	}
}

// A checkpoint of a version the reader does not know is intact and kept.
func TestFileStoreUnsupportedVersionKept(t *testing.T) {
	for _, tt := range []struct {
		name   string
		file   []byte
		schema *Schema
	}{
		{name: "future version", file: envelopeBytes(3, `{"attempt":1}`), schema: schemaV2},
		{name: "old version without migration", file: envelopeBytes(1, `{"attempt":1}`), schema: schemaV3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, dir := newTestStore(t)
			path := filepath.Join(dir, "pod")
			if err := os.WriteFile(path, tt.file, 0o600); err != nil {
				t.Fatal(err)
			}
			err := s.GetCheckpoint("pod", &Data[podState]{Schema: tt.schema})
			if !errors.Is(err, ErrUnsupportedVersion) || errors.Is(err, ErrCorruptCheckpoint) {
				t.Fatalf("GetCheckpoint = %v, want ErrUnsupportedVersion only", err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			if names := dirNames(t, dir); !slices.Equal(names, []string{"pod"}) {
				t.Errorf("directory holds %v, want the file left in place", names)
			}
			// Overwriting it is how the caller moves on.
			if err := s.CreateCheckpoint("pod", &Data[podState]{Schema: tt.schema, Value: podState{Attempt: 4}}); err != nil {
				t.Fatal(err)
			}
			if err := s.GetCheckpoint("pod", &Data[podState]{Schema: tt.schema}); err != nil {
				t.Errorf("GetCheckpoint after overwrite: %v", err)
			}
		})
	}
}

func TestFileStoreMigratesOldVersion(t *testing.T) {
	s, dir := newTestStore(t)
	if err := os.WriteFile(filepath.Join(dir, "pod"), envelopeBytes(1, `{"attempt":1,"phase":"Running"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &Data[podState]{Schema: schemaV2}
	if err := s.GetCheckpoint("pod", d); err != nil {
		t.Fatalf("GetCheckpoint: %v", err)
	}
	if d.MigratedFrom() != 1 || !reflect.DeepEqual(d.Value, podState{Attempt: 2, Phase: "Running"}) {
		t.Errorf("got %+v migrated from %d; want attempt 2 migrated from 1", d.Value, d.MigratedFrom())
	}
}

func TestNewFileStoreDirectory(t *testing.T) {
	t.Run("created 0700 with parents", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "a", "b")
		if _, err := NewFileStore(dir); err != nil {
			t.Fatal(err)
		}
		assertMode(t, dir, 0o700)
	})
	t.Run("existing looser mode restricted", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "cp")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		if _, err := NewFileStore(dir); err != nil {
			t.Fatal(err)
		}
		assertMode(t, dir, 0o700)
	})
	t.Run("a file, not a directory", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := NewFileStore(path); err == nil {
			t.Error("NewFileStore on a file succeeded")
		}
	})
	t.Run("empty path", func(t *testing.T) {
		if _, err := NewFileStore(""); err == nil {
			t.Error("NewFileStore(\"\") succeeded")
		}
	})
	t.Run("a file with a looser mode is replaced by a 0600 one", func(t *testing.T) {
		s, dir := newTestStore(t)
		path := filepath.Join(dir, "pod")
		if err := os.WriteFile(path, []byte("old"), 0o666); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, 0o666); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateCheckpoint("pod", NewData(1)); err != nil {
			t.Fatal(err)
		}
		assertMode(t, path, 0o600)
	})
}

func TestFileStoreTempFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cp")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	valid := envelopeBytes(1, `{"attempt":1}`)
	files := map[string][]byte{
		".pod.tmp-123456":        valid[:10], // a torn write
		".pod.tmp-999":           valid,      // complete, but never renamed
		".other.tmp-1":           nil,
		"pod":                    valid,
		"pod.corrupt-1700000000": []byte("junk"),
		".hidden":                []byte("not ours"),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, err := NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".hidden", "pod", "pod.corrupt-1700000000"}
	if got := dirNames(t, dir); !slices.Equal(got, want) {
		t.Errorf("after NewFileStore the directory holds %v, want %v", got, want)
	}
	if keys, err := s.ListCheckpoints(); err != nil || !slices.Equal(keys, []string{"pod"}) {
		t.Errorf("ListCheckpoints = %v, %v; want [pod]", keys, err)
	}
	// A write in progress (its temp file) is never listed.
	if err := os.WriteFile(filepath.Join(dir, ".new.tmp-42"), valid, 0o600); err != nil {
		t.Fatal(err)
	}
	if keys, err := s.ListCheckpoints(); err != nil || !slices.Equal(keys, []string{"pod"}) {
		t.Errorf("ListCheckpoints with a write in progress = %v, %v; want [pod]", keys, err)
	}
}

// Writes, reads and removals from many goroutines leave every key holding one
// complete value. Run with -race.
func TestFileStoreConcurrent(t *testing.T) {
	s, dir := newTestStore(t)
	keys := []string{"k0", "k1", "k2", "k3"}
	const workers, rounds = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds*3)
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				key := keys[(w+i)%len(keys)]
				v := podState{Attempt: w*1000 + i, Phase: strings.Repeat("x", (w+i)%7*100)}
				if err := s.CreateCheckpoint(key, NewData(v)); err != nil {
					errs <- err
				}
				if err := s.GetCheckpoint(key, &Data[podState]{}); err != nil && !errors.Is(err, ErrCheckpointNotFound) {
					errs <- err
				}
				if i%5 == 4 {
					if err := s.RemoveCheckpoint(key); err != nil {
						errs <- err
					}
				}
				if _, err := s.ListCheckpoints(); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, name := range dirNames(t, dir) {
		if !slices.Contains(keys, name) {
			t.Errorf("unexpected file %s left in the store", name)
		}
	}
	if n := s.locks.Len(); n != 0 {
		t.Errorf("%d key locks left after all operations, want 0", n)
	}
}

func TestMetricsRegistered(t *testing.T) {
	newTestStore(t)
	if _, err := NewFileStore(t.TempDir()); err != nil { // A second store registers nothing twice.
		t.Fatal(err)
	}
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	for _, want := range []string{"nodelet_checkpoint_write_duration_seconds", "nodelet_checkpoint_corrupt_total"} {
		if !slices.Contains(names, want) {
			t.Errorf("metric %s not in controller-runtime's registry", want)
		}
	}
}
