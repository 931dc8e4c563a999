package staticpod

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
)

// debounce is how long FileSource waits after a change to the path before
// reading it, so that a burst of events (an editor's write and rename) gives
// one read.
const debounce = 100 * time.Millisecond

// FileSource reads the static pods of Path, a directory or a single file. In
// a directory it reads every regular file directly in it whose name does not
// start with a dot, in name order, and skips subdirectories, as the kubelet
// does. It reads at start, after every change the file system reports and
// every Period, and calls Update with all pods of the path whenever they
// differ from the last call, and once at start even if there are none. A
// missing path is an empty set, not an error, and is watched for its
// creation. A file that does not decode, or whose pod has the name of a pod
// of an earlier file, is left out and reported once per content. Update and
// Report are called from Start's goroutine, one at a time.
type FileSource struct {
	Path     string
	NodeName string
	Period   time.Duration
	Update   func(pods []*corev1.Pod)
	Report   func(Problem)
	Log      logr.Logger

	// files caches the decoded pods of each file by its content, so that an
	// unchanged file is neither decoded nor reported again.
	files map[string]*manifest
	sent  lastSet
	// poll turns the file system watch off, leaving the period alone.
	poll bool
}

// manifest is one file's content hash and what it decoded to.
type manifest struct {
	sum        [sha256.Size]byte
	readFailed bool
	pods       []*corev1.Pod
	err        error
	reported   map[string]bool
}

// Start reads and watches the path until ctx ends.
func (s *FileSource) Start(ctx context.Context) error {
	if s.Path == "" {
		return errors.New("static pod path is empty")
	}
	if s.Period <= 0 {
		return fmt.Errorf("static pod file check period %v is not positive", s.Period)
	}
	s.files = map[string]*manifest{}
	var watcher *fsnotify.Watcher
	var err error
	if !s.poll {
		watcher, err = fsnotify.NewWatcher()
	}
	if err != nil {
		// Polling still works; the kubelet also falls back to it.
		s.Log.Error(err, "Could not watch static pod path, polling only", "path", s.Path)
	} else if watcher != nil {
		defer watcher.Close()
	}

	ticker := time.NewTicker(s.Period)
	defer ticker.Stop()
	var events <-chan fsnotify.Event
	var watchErrs <-chan error
	if watcher != nil {
		events, watchErrs = watcher.Events, watcher.Errors
	}
	timer := time.NewTimer(0) // the first read, at once
	defer timer.Stop()
	pending := true
	path := filepath.Clean(s.Path)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
			pending = false
			s.watch(watcher)
			s.sync()
		case <-ticker.C:
			s.watch(watcher)
			s.sync()
		case ev := <-events:
			// The parent's watch also reports its other entries.
			if ev.Name != path && filepath.Dir(ev.Name) != path {
				continue
			}
			s.Log.V(4).Info("Static pod path changed", "path", ev.Name, "op", ev.Op.String())
			// Read once per burst, at most debounce after its first event,
			// even if events never stop.
			if !pending {
				pending = true
				timer.Reset(debounce)
			}
		case err := <-watchErrs:
			s.Log.Error(err, "Watching static pod path failed", "path", s.Path)
		}
	}
}

// watch (re)adds the watches: the path's parent, to see the path appear,
// change or go, and the path itself when it is a directory. Adding a watch
// that exists is harmless; a watch that cannot be added is left to polling.
func (s *FileSource) watch(w *fsnotify.Watcher) {
	if w == nil {
		return
	}
	path := filepath.Clean(s.Path)
	for _, p := range []string{filepath.Dir(path), path} {
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() || slices.Contains(w.WatchList(), p) {
			continue
		}
		if err := w.Add(p); err != nil {
			s.Log.V(2).Info("Could not watch static pod path", "path", p, "error", err.Error())
		}
	}
}

// sync reads the path and calls Update when its pods changed.
func (s *FileSource) sync() {
	pods := s.read()
	if !s.sent.changed(pods) {
		return
	}
	s.Log.V(2).Info("Static pods of path changed", "path", s.Path, "pods", len(pods))
	if s.Update != nil {
		s.Update(pods)
	}
}

// read returns the pods of all usable files of the path.
func (s *FileSource) read() []*corev1.Pod {
	paths, err := s.list()
	if err != nil {
		s.Log.Error(err, "Could not read static pod path", "path", s.Path)
	}
	var pods []*corev1.Pod
	names := map[string]string{}
	kept := map[string]*manifest{}
	for _, path := range paths {
		m := s.load(path)
		if m == nil {
			continue
		}
		kept[path] = m
		if m.err != nil {
			s.report(m, "decode", m.err, path)
			continue
		}
		var clash error
		mine := map[string]bool{}
		for _, pod := range m.pods {
			name := FullName(pod)
			if first, ok := names[name]; ok {
				clash = fmt.Errorf("%s: static pod %s is already defined by %s, ignoring this file", path, name, first)
				break
			}
			if mine[name] {
				clash = fmt.Errorf("%s: static pod %s is defined twice, ignoring this file", path, name)
				break
			}
			mine[name] = true
		}
		if clash != nil {
			s.report(m, "duplicate", clash, path)
			continue
		}
		for _, pod := range m.pods {
			names[FullName(pod)] = path
		}
		pods = append(pods, m.pods...)
	}
	s.files = kept
	return pods
}

// list returns the manifest files of the path, sorted. A missing path has
// none.
func (s *FileSource) list() ([]string, error) {
	fi, err := os.Stat(s.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading static pod path: %w", err)
	case fi.Mode().IsRegular():
		return []string{s.Path}, nil
	case !fi.IsDir():
		return nil, fmt.Errorf("static pod path %s is neither a directory nor a regular file", s.Path)
	}
	entries, err := os.ReadDir(s.Path)
	if err != nil {
		return nil, fmt.Errorf("reading static pod directory: %w", err)
	}
	var paths []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(s.Path, e.Name())
		// Stat follows symbolic links, as the kubelet does.
		fi, err := os.Stat(path)
		switch {
		case err != nil:
			if !errors.Is(err, fs.ErrNotExist) {
				s.Log.Error(err, "Could not read static pod manifest", "path", path)
			}
		case fi.IsDir():
			s.Log.V(2).Info("Skipping directory in static pod path", "path", path)
		case !fi.Mode().IsRegular():
			s.Log.V(2).Info("Skipping static pod manifest that is not a regular file", "path", path, "mode", fi.Mode().String())
		default:
			paths = append(paths, path)
		}
	}
	slices.Sort(paths)
	return paths, nil
}

// load reads one file and decodes it unless its content is unchanged. It
// returns nil for a file that is gone.
func (s *FileSource) load(path string) *manifest {
	data, err := readManifest(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		// Report each failure to read once, until it reads again.
		m := &manifest{readFailed: true, err: fmt.Errorf("%s: reading static pod manifest: %w", path, err), reported: map[string]bool{}}
		if prev := s.files[path]; prev != nil && prev.err != nil && prev.err.Error() == m.err.Error() {
			return prev
		}
		return m
	}
	sum := sha256.Sum256(data)
	if prev := s.files[path]; prev != nil && !prev.readFailed && prev.sum == sum {
		return prev
	}
	pods, err := Decode(data, SourceFile, path, s.NodeName)
	return &manifest{sum: sum, pods: pods, err: err, reported: map[string]bool{}}
}

// readManifest reads a manifest file of at most maxManifestBytes: a file
// that grows without end (a log written into the directory by mistake, a
// device) is refused, not read into memory.
func readManifest(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxManifestBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxManifestBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxManifestBytes)
	}
	return data, nil
}

// report hands a problem of a file to Report once per content and kind.
func (s *FileSource) report(m *manifest, kind string, err error, path string) {
	if m.reported[kind] {
		return
	}
	m.reported[kind] = true
	s.Log.Info("Ignoring static pod manifest", "path", path, "error", err.Error())
	if s.Report != nil {
		s.Report(Problem{Source: SourceFile, Origin: path, Err: err})
	}
}
