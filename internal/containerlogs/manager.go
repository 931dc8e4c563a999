package containerlogs

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/metrics"
)

// Runtime is what Manager asks of the container runtime (cri.Runtime).
type Runtime interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, containerID string) (*runtimeapi.ContainerStatus, error)
	ReopenContainerLog(ctx context.Context, containerID string) error
}

// Options configure a Manager.
type Options struct {
	// PodLogsDir is the root of the pods' log directories: every log
	// Manager rotates, and every link it makes or removes points, inside.
	PodLogsDir string
	// LinksDir holds the log links; "" makes none.
	LinksDir string
	// NodeName is the node nodelet runs: a sweep removes the links of
	// removed containers only into pod log directories whose marker names
	// it (see PodDirMarker), or into pod log directories that are gone.
	NodeName string
	// MaxSize is the size (bytes) at which a log is rotated.
	MaxSize int64
	// MaxFiles is how many files of a log remain, the current one included
	// (at least 2).
	MaxFiles int
	// MaxWorkers is how many logs are rotated at once (at least 1).
	MaxWorkers int
	// MonitorInterval is how often logs are checked and links swept.
	MonitorInterval time.Duration
	// Clock names the rotated files; nil is the real clock.
	Clock  clock.PassiveClock
	Logger logr.Logger
}

// Manager rotates the logs of nodelet's running containers and keeps their
// log links, every MonitorInterval once started (a manager.Runnable). Its
// Link and Forget keep the links of containers as they are created and
// removed. Safe for concurrent use.
type Manager struct {
	runtime Runtime
	opts    Options

	// mu guards known: what the manager learnt of each container it
	// linked or synced, by ID.
	mu    sync.Mutex
	known map[string]knownContainer
	// dirs keeps the running containers' log directories open for the
	// size checks.
	dirs *dirCache
}

// knownContainer is what a Manager remembers of a container: its link
// name, so that Forget needs no scan of the links directory, and its log
// path ("" for none) once a sync read it, so that later syncs ask the
// runtime for the status of new containers only (a container's log path
// never changes).
type knownContainer struct {
	link string
	// listedLink is the link name made of the container's labels once a
	// sync listed it ("" before), so that later syncs make it no more.
	listedLink   string
	logPath      string
	logPathKnown bool
}

// New returns a Manager over runtime.
func New(runtime Runtime, opts Options) (*Manager, error) {
	if runtime == nil {
		return nil, errors.New("the container log manager needs a runtime")
	}
	if !filepath.IsAbs(opts.PodLogsDir) {
		return nil, fmt.Errorf("the pod log directory %q is not an absolute path", opts.PodLogsDir)
	}
	if opts.MaxSize <= 0 || opts.MaxFiles < 2 || opts.MaxWorkers < 1 || opts.MonitorInterval <= 0 {
		return nil, fmt.Errorf("invalid container log options: maxSize %d, maxFiles %d, maxWorkers %d, monitorInterval %s",
			opts.MaxSize, opts.MaxFiles, opts.MaxWorkers, opts.MonitorInterval)
	}
	opts.PodLogsDir = filepath.Clean(opts.PodLogsDir)
	if opts.LinksDir != "" {
		opts.LinksDir = filepath.Clean(opts.LinksDir)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Manager{runtime: runtime, opts: opts, known: map[string]knownContainer{}, dirs: newDirCache(maxCachedDirs())}, nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every node
// rotates its own logs.
func (m *Manager) NeedLeaderElection() bool { return false }

// Start rotates and sweeps every MonitorInterval until ctx ends.
func (m *Manager) Start(ctx context.Context) error {
	_ = wait.PollUntilContextCancel(ctx, m.opts.MonitorInterval, false, func(ctx context.Context) (bool, error) {
		if err := m.Sync(ctx); err != nil && ctx.Err() == nil {
			m.opts.Logger.Error(err, "Unable to manage container logs")
		}
		return false, nil
	})
	m.dirs.closeAll()
	return nil
}

// Sync rotates every running container's log that reached MaxSize, with up
// to MaxWorkers at once, then makes the missing links of the containers the
// runtime holds and removes the links of containers it no longer holds
// that point into pod log directories this node's nodelet made, or that
// are gone (sweepLinks). A failed rotation is logged and counted, and
// tried again next time.
//
// The sizes are read here, one stat per log; only the logs that may need
// rotating go to workers, started for them. A node whose logs are all
// small wakes no worker.
func (m *Manager) Sync(ctx context.Context) error {
	// The links are read before the containers are listed: a link made
	// after this read is of a container the list holds, or is left alone.
	links, err := m.readLinks()
	if err != nil {
		return err
	}
	containers, err := m.runtime.ListContainers(ctx, nil)
	if err != nil {
		return fmt.Errorf("listing containers: %w", err)
	}
	// A directory that cannot be opened sends every log to rotate, which
	// reports why.
	dir, err := openLogsDir(m.opts.PodLogsDir, m.dirs)
	if err == nil {
		defer func() { _ = dir.Close() }()
	}
	// The directories of logs no longer checked are closed: their
	// containers stopped or are gone.
	defer m.dirs.sweep()
	// keep holds the links of every listed container, want those whose
	// log path is known: a status that cannot be read keeps a link, but
	// does not make one.
	keep, want := make(map[string]bool, len(containers)), make(map[string]string, len(containers))
	var jobs chan job
	var wg sync.WaitGroup
	for _, c := range containers {
		name := m.noteListed(c)
		keep[name] = true
		logPath, ok := m.logPath(ctx, c.GetId())
		if !ok || logPath == "" {
			continue
		}
		want[name] = logPath
		if c.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING || !m.due(dir, logPath) {
			continue
		}
		if jobs == nil {
			jobs = make(chan job)
			for range m.opts.MaxWorkers {
				wg.Go(func() {
					for j := range jobs {
						m.rotateAndCount(ctx, j)
					}
				})
			}
		}
		select {
		case jobs <- job{id: c.GetId(), logPath: logPath}:
		case <-ctx.Done():
		}
	}
	if jobs != nil {
		close(jobs)
	}
	wg.Wait()
	m.forgetUnlisted(containers)
	m.sweepLinks(links, keep, want)
	return ctx.Err()
}

// due reports whether the log at logPath is for rotate to look at: it has
// reached MaxSize, or it is outside PodLogsDir, not a regular file, behind
// a link or cannot be read (rotate says so). dir is PodLogsDir opened, or
// nil when it could not be.
func (m *Manager) due(dir *logsDir, logPath string) bool {
	rel, ok := m.inLogsDir(logPath)
	if !ok || dir == nil {
		return true
	}
	regular, size, err := dir.lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false
	case err != nil || !regular:
		return true
	}
	return size >= m.opts.MaxSize
}

// logPath is the log path of container id ("" for none), from an earlier
// sync or else from the runtime; ok is false when the runtime could not
// tell, which is tried again at the next sync.
func (m *Manager) logPath(ctx context.Context, id string) (path string, ok bool) {
	m.mu.Lock()
	k := m.known[id]
	m.mu.Unlock()
	if k.logPathKnown {
		return k.logPath, true
	}
	st, err := m.runtime.ContainerStatus(ctx, id)
	if err != nil {
		if !cri.IsNotFound(err) {
			m.opts.Logger.Error(err, "Unable to read a container's log path", "containerID", id)
		}
		return "", false
	}
	m.mu.Lock()
	k = m.known[id]
	k.logPath, k.logPathKnown = st.GetLogPath(), true
	m.known[id] = k
	m.mu.Unlock()
	return st.GetLogPath(), true
}

// forgetUnlisted forgets the containers no longer listed.
func (m *Manager) forgetUnlisted(listed []*runtimeapi.Container) {
	ids := make(map[string]bool, len(listed))
	for _, c := range listed {
		ids[c.GetId()] = true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for id := range m.known {
		if !ids[id] {
			delete(m.known, id)
		}
	}
}

// noteListed records the link name of the listed container c, made of
// its labels, and returns it. The name is made once per container: its
// labels never change.
func (m *Manager) noteListed(c *runtimeapi.Container) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.known[c.GetId()]
	if k.listedLink == "" {
		l := c.GetLabels()
		k.listedLink = LinkName(l[kubetypes.KubernetesPodNameLabel], l[kubetypes.KubernetesPodNamespaceLabel],
			l[kubetypes.KubernetesContainerNameLabel], c.GetId())
	}
	k.link = k.listedLink
	m.known[c.GetId()] = k
	return k.link
}

// noteCreated records the link name and log path of a container just
// created.
func (m *Manager) noteCreated(id, name, logPath string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.known[id] = knownContainer{link: name, logPath: logPath, logPathKnown: true}
}

// takeLink returns the link name of container id, if known, and forgets
// the container.
func (m *Manager) takeLink(id string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, ok := m.known[id]
	delete(m.known, id)
	return k.link, ok && k.link != ""
}

// job is one container's log to check.
type job struct{ id, logPath string }

func (m *Manager) rotateAndCount(ctx context.Context, j job) {
	rotated, err := m.rotate(ctx, j.id, j.logPath)
	if err != nil {
		metrics.ContainerLogRotationFailures.Inc()
		m.opts.Logger.Error(err, "Unable to rotate a container log", "containerID", j.id, "path", j.logPath)
		return
	}
	if rotated != "" {
		metrics.ContainerLogRotations.Inc()
		m.opts.Logger.V(1).Info("Rotated container log", "containerID", j.id, "path", j.logPath, "rotated", rotated)
	}
}

// rotate carries out the rotation plan of one container's log, through a
// root at PodLogsDir so that no path, link or not, leads outside it, and
// returns the rotated file's name when the log was rotated.
func (m *Manager) rotate(ctx context.Context, id, logPath string) (string, error) {
	rel, ok := m.inLogsDir(logPath)
	if !ok {
		// Made with another pod log directory: not nodelet's to touch.
		m.opts.Logger.V(1).Info("Not rotating a log outside the pod log directory", "containerID", id, "path", logPath)
		return "", nil
	}
	root, err := os.OpenRoot(m.opts.PodLogsDir)
	if err != nil {
		return "", fmt.Errorf("opening the pod log directory: %w", err)
	}
	defer func() { _ = root.Close() }()
	fi, err := root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the size of log %s: %w", logPath, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("log %s is not a regular file", logPath)
	}
	if fi.Size() < m.opts.MaxSize {
		return "", nil
	}
	dir := filepath.Dir(rel)
	names, err := readDirNames(root, dir)
	if err != nil {
		return "", err
	}
	p := PlanRotation(filepath.Base(rel), fi.Size(), names, m.opts.MaxSize, m.opts.MaxFiles, m.opts.Clock.Now())
	for _, n := range p.Remove {
		if err := root.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("removing rotated log %s: %w", n, err)
		}
	}
	for _, n := range p.Compress {
		if err := compress(root, filepath.Join(dir, n)); err != nil {
			return "", err
		}
	}
	if p.Rename == "" {
		return "", nil
	}
	rotated := filepath.Join(dir, p.Rename)
	if err := root.Rename(rel, rotated); err != nil {
		return "", fmt.Errorf("renaming log %s: %w", logPath, err)
	}
	if err := m.runtime.ReopenContainerLog(ctx, id); err != nil {
		// The runtime still writes to the renamed file: give it its name
		// back, or the log would be lost to readers.
		if rerr := root.Rename(rotated, rel); rerr != nil {
			err = errors.Join(err, fmt.Errorf("renaming log %s back: %w", logPath, rerr))
		}
		return "", err
	}
	return p.Rename, nil
}

// readDirNames lists the names in dir of root.
func readDirNames(root *os.Root, dir string) ([]string, error) {
	d, err := root.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("opening log directory %s: %w", dir, err)
	}
	defer func() { _ = d.Close() }()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("listing log directory %s: %w", dir, err)
	}
	return names, nil
}

// compress replaces the regular file name of root by name.gz, with its
// mode: written to a temporary file, synced, renamed, then the original
// removed, so that an interruption leaves the original whole.
func compress(root *os.Root, name string) (err error) {
	src, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("opening rotated log %s: %w", name, err)
	}
	defer func() { _ = src.Close() }()
	fi, err := src.Stat()
	if err != nil {
		return fmt.Errorf("reading rotated log %s: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("rotated log %s is not a regular file", name)
	}
	tmp := name + compressSuffix + tmpSuffix
	dst, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, fi.Mode().Perm())
	if err != nil {
		return fmt.Errorf("creating compressed log %s: %w", tmp, err)
	}
	defer func() {
		if err != nil {
			_ = dst.Close()
			_ = root.Remove(tmp)
		}
	}()
	if err := dst.Chmod(fi.Mode().Perm()); err != nil {
		return fmt.Errorf("setting the mode of compressed log %s: %w", tmp, err)
	}
	zw := gzip.NewWriter(dst)
	if _, err := io.Copy(zw, src); err != nil {
		return fmt.Errorf("compressing rotated log %s: %w", name, err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compressing rotated log %s: %w", name, err)
	}
	if err := dst.Sync(); err != nil {
		return fmt.Errorf("syncing compressed log %s: %w", tmp, err)
	}
	if err := dst.Close(); err != nil {
		return fmt.Errorf("closing compressed log %s: %w", tmp, err)
	}
	if err := root.Rename(tmp, name+compressSuffix); err != nil {
		return fmt.Errorf("renaming compressed log %s: %w", tmp, err)
	}
	if err := root.Remove(name); err != nil {
		return fmt.Errorf("removing compressed rotated log %s: %w", name, err)
	}
	return nil
}

// inLogsDir returns path relative to PodLogsDir, when it is an absolute
// path inside it.
func (m *Manager) inLogsDir(path string) (string, bool) {
	if !filepath.IsAbs(path) {
		return "", false
	}
	rel, err := filepath.Rel(m.opts.PodLogsDir, filepath.Clean(path))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return rel, true
}

// Link makes the log link of a container that logs to logPath. It is no
// error when the link is there already; a link of that name that points
// elsewhere is left alone. The manager remembers logPath as the
// container's log path, as the runtime reports it (the sandbox's log
// directory joined with the container's), so that no later sync asks the
// runtime for it.
func (m *Manager) Link(pod, namespace, container, containerID, logPath string) error {
	if logPath == "" {
		return nil
	}
	if _, ok := m.inLogsDir(logPath); !ok {
		if m.opts.LinksDir == "" {
			return nil
		}
		return fmt.Errorf("log %s is not in the pod log directory %s", logPath, m.opts.PodLogsDir)
	}
	name := LinkName(pod, namespace, container, containerID)
	m.noteCreated(containerID, name, logPath)
	if m.opts.LinksDir == "" {
		return nil
	}
	return m.makeLink(filepath.Join(m.opts.LinksDir, name), logPath)
}

// Forget removes what a removed container leaves of its log: its link and
// its rotated files next to logPath ("" for none). The current log file is
// the remover's. The link of a container linked or synced since nodelet
// started is removed by name; otherwise the links directory is searched
// (and those whose names are cut short go with the next sweep).
func (m *Manager) Forget(containerID, logPath string) error {
	var errs []error
	name, known := m.takeLink(containerID)
	switch {
	case m.opts.LinksDir == "" || containerID == "":
	case known:
		errs = append(errs, m.removeLinkNamed(name))
	default:
		entries, err := os.ReadDir(m.opts.LinksDir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("listing log links: %w", err))
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), "-"+containerID+linkSuffix) {
				errs = append(errs, m.removeLink(e))
			}
		}
	}
	if logPath != "" {
		errs = append(errs, m.removeRotated(logPath))
	}
	return errors.Join(errs...)
}

// removeRotated removes the rotated files of the log at logPath.
func (m *Manager) removeRotated(logPath string) error {
	rel, ok := m.inLogsDir(logPath)
	if !ok {
		return fmt.Errorf("log %s is not in the pod log directory %s", logPath, m.opts.PodLogsDir)
	}
	root, err := os.OpenRoot(m.opts.PodLogsDir)
	if err != nil {
		return fmt.Errorf("opening the pod log directory: %w", err)
	}
	defer func() { _ = root.Close() }()
	dir := filepath.Dir(rel)
	names, err := readDirNames(root, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		if IsRotatedFile(filepath.Base(rel), n) {
			if err := root.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing rotated log %s: %w", n, err))
			}
		}
	}
	return errors.Join(errs...)
}

// readLinks lists the links directory; none when there is none.
func (m *Manager) readLinks() ([]fs.DirEntry, error) {
	if m.opts.LinksDir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(m.opts.LinksDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("listing log links: %w", err)
	}
	return entries, nil
}

// sweepLinks makes the links of want (name → log path) that are missing,
// for logs that exist, and removes those of links (read before keep was)
// that PlanLinkSweep gives: links of containers the runtime no longer
// holds, into pod log directories this node's nodelet made or that are
// gone. Links into others' pod log directories, and links elsewhere, are
// never touched.
func (m *Manager) sweepLinks(links []fs.DirEntry, keep map[string]bool, want map[string]string) {
	if m.opts.LinksDir == "" {
		return
	}
	var states []LinkState
	owners := map[string]LinkState{}
	for _, e := range links {
		if !keep[e.Name()] {
			states = append(states, m.linkState(e, owners))
		}
	}
	for _, name := range PlanLinkSweep(states, keep, m.opts.NodeName) {
		if err := m.removeLinkNamed(name); err != nil {
			m.opts.Logger.Error(err, "Unable to remove the log link of a removed container", "link", name)
		}
	}
	for name, logPath := range want {
		// A link listed at the start of the sync is there, or was removed
		// since and is made at the next one: only the others are looked
		// for. links is sorted by name, as os.ReadDir returns it.
		if _, listed := slices.BinarySearchFunc(links, name, compareEntryName); listed {
			continue
		}
		link := filepath.Join(m.opts.LinksDir, name)
		if _, err := os.Lstat(link); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if _, err := os.Stat(logPath); err != nil {
			continue
		}
		if err := m.makeLink(link, logPath); err != nil {
			m.opts.Logger.Error(err, "Unable to make a missing log link", "link", name)
			continue
		}
		metrics.ContainerLogLinksRepaired.Inc()
		m.opts.Logger.V(1).Info("Made a missing log link", "link", name, "path", logPath)
	}
}

// compareEntryName orders the directory entry e by name against name.
func compareEntryName(e fs.DirEntry, name string) int { return strings.Compare(e.Name(), name) }

// linkState reads what PlanLinkSweep needs of the entry e of the links
// directory: the pod log directory its target lies in and that
// directory's marker. owners caches the markers read, by directory, for
// one sweep. A marker that cannot be read is logged and counts as none.
func (m *Manager) linkState(e fs.DirEntry, owners map[string]LinkState) LinkState {
	st := LinkState{Name: e.Name()}
	if e.Type()&fs.ModeSymlink == 0 {
		return st
	}
	target, err := os.Readlink(filepath.Join(m.opts.LinksDir, e.Name()))
	if err != nil {
		return st
	}
	rel, ok := m.inLogsDir(target)
	if !ok {
		return st
	}
	st.PodDir, _, _ = strings.Cut(rel, string(filepath.Separator))
	if known, ok := owners[st.PodDir]; ok {
		st.Owner, st.DirGone = known.Owner, known.DirGone
		return st
	}
	owner, err := PodDirOwner(filepath.Join(m.opts.PodLogsDir, st.PodDir))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		st.DirGone = true
	case err != nil:
		m.opts.Logger.Error(err, "Unable to read whose pod log directory a log link points into", "link", e.Name())
	}
	st.Owner = owner
	owners[st.PodDir] = st
	return st
}

// makeLink makes link point to logPath, in a links directory made if
// needed. It is no error when the link is there already; a link of that
// name that points elsewhere is left alone.
func (m *Manager) makeLink(link, logPath string) error {
	if err := os.MkdirAll(m.opts.LinksDir, 0o755); err != nil {
		return fmt.Errorf("creating the log link directory: %w", err)
	}
	err := os.Symlink(logPath, link)
	if errors.Is(err, fs.ErrExist) {
		if target, rerr := os.Readlink(link); rerr == nil && target == logPath {
			return nil
		}
		return fmt.Errorf("log link %s exists and points elsewhere", link)
	}
	if err != nil {
		return fmt.Errorf("creating log link %s: %w", link, err)
	}
	return nil
}

// removeLinkNamed removes the link name of the links directory, if there,
// as removeLink does.
func (m *Manager) removeLinkNamed(name string) error {
	fi, err := os.Lstat(filepath.Join(m.opts.LinksDir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading log link %s: %w", name, err)
	}
	return m.removeLink(fs.FileInfoToDirEntry(fi))
}

// removeLink removes the link e of the links directory when it points into
// PodLogsDir; anything else is left alone.
func (m *Manager) removeLink(e fs.DirEntry) error {
	if e.Type()&fs.ModeSymlink == 0 {
		return nil
	}
	link := filepath.Join(m.opts.LinksDir, e.Name())
	target, err := os.Readlink(link)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("reading log link %s: %w", link, err)
	}
	if _, ok := m.inLogsDir(target); !ok {
		return nil
	}
	if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing log link %s: %w", link, err)
	}
	return nil
}
