package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/internal/atomicfile"
	"github.com/nodelet/nodelet/test/utils"
)

const (
	// stateFile records what a run started; it exists from the first start
	// until everything is stopped.
	stateFile = "state.json"
	// lockFile is flocked by the running localup for its whole life.
	lockFile = "lock"
	// kubeconfigFile is the admin kubeconfig of the running cluster.
	kubeconfigFile = "admin.kubeconfig"
	// downWait bounds how long down waits for a running localup to stop.
	downWait = 3 * time.Minute
)

// state is what a run started, enough to stop it without the run: the
// directories its processes name in their arguments, and its containerd.
type state struct {
	PID        int              `json:"pid"`
	Dirs       []string         `json:"dirs"`
	Containerd *containerdState `json:"containerd,omitempty"`
	// Cgroups are nodelet's cgroupRoots, removed with what runs in them.
	Cgroups []string `json:"cgroups,omitempty"`
	// Containerds are the nodes' containerds of a multi-node run.
	Containerds []containerdState `json:"containerds,omitempty"`
	// Networks are the slots of a multi-node run's node networks
	// (utils.NodeNetwork.N).
	Networks []int `json:"networks,omitempty"`
}

type containerdState struct {
	Dir    string `json:"dir"`
	Bridge string `json:"bridge"`
}

// stateDir is a state directory whose lock this process holds.
type stateDir struct {
	path string
	lock *os.File
	st   state
}

// stateDirPath is $LOCALUP_DIR, or bin/localup in the repository.
func stateDirPath() (string, error) {
	if d := os.Getenv("LOCALUP_DIR"); d != "" {
		return filepath.Abs(d)
	}
	root, err := utils.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin", "localup"), nil
}

// lockStateDir takes the state directory's lock without waiting; it fails
// while another localup runs there.
func lockStateDir(path string) (*stateDir, error) {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("creating the state directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(path, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the state lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, errRunning
		}
		return nil, fmt.Errorf("locking the state directory: %w", err)
	}
	return &stateDir{path: path, lock: f}, nil
}

// errRunning means another localup holds the state directory.
var errRunning = errors.New("a local cluster is already running from this state directory (stop it with Ctrl-C or make run-down)")

func (s *stateDir) kubeconfig() string { return filepath.Join(s.path, kubeconfigFile) }

// leftovers reads the state a killed run left, if any.
func (s *stateDir) leftovers() (*state, error) {
	data, err := os.ReadFile(filepath.Join(s.path, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the state of the last run: %w", err)
	}
	st := &state{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("decoding the state of the last run: %w", err)
	}
	return st, nil
}

// record changes the state and writes it, atomically.
func (s *stateDir) record(change func(*state)) error {
	s.st.PID = os.Getpid()
	change(&s.st)
	data, err := json.MarshalIndent(s.st, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the run state: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(s.path, stateFile), data, 0o600); err != nil {
		return fmt.Errorf("writing the run state: %w", err)
	}
	return nil
}

// addDirs records directories whose processes, mounts and contents down
// removes.
func (s *stateDir) addDirs(dirs ...string) error {
	return s.record(func(st *state) { st.Dirs = append(st.Dirs, dirs...) })
}

// forget removes the state and the kubeconfig: everything was stopped.
func (s *stateDir) forget() error {
	return errors.Join(
		removeIfExists(filepath.Join(s.path, stateFile)),
		removeIfExists(s.kubeconfig()),
	)
}

// unlock releases the lock; the directory stays for the next run.
func (s *stateDir) unlock() { _ = s.lock.Close() }

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	return nil
}

// down stops the run of the state directory at path: a running localup is
// asked to stop (SIGTERM) and waited for; what a killed one left is
// removed here.
func down(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		step("nothing to stop: %s does not exist", path)
		return nil
	}
	s, err := lockStateDir(path)
	stopped := false
	if errors.Is(err, errRunning) {
		s, err = stopRunning(path)
		stopped = true
	}
	if err != nil {
		return err
	}
	defer s.unlock()
	st, err := s.leftovers()
	if err != nil {
		return err
	}
	if st == nil {
		if stopped {
			step("the local cluster stopped and left nothing behind")
		} else {
			step("nothing to stop or clean up in %s", path)
		}
		return nil
	}
	step("cleaning up after the run of pid %d", st.PID)
	if err := cleanUp(st); err != nil {
		return err
	}
	return s.forget()
}

// stopRunning sends SIGTERM to the localup holding the lock and waits for
// it to stop and release the lock.
func stopRunning(path string) (*stateDir, error) {
	data, err := os.ReadFile(filepath.Join(path, stateFile))
	if err != nil {
		return nil, fmt.Errorf("reading the state of the running cluster: %w", err)
	}
	st := &state{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("decoding the state of the running cluster: %w", err)
	}
	step("stopping the local cluster of pid %d", st.PID)
	if err := syscall.Kill(st.PID, syscall.SIGTERM); err != nil {
		return nil, fmt.Errorf("signalling localup (pid %d): %w", st.PID, err)
	}
	deadline := time.Now().Add(downWait)
	for time.Now().Before(deadline) {
		s, err := lockStateDir(path)
		if !errors.Is(err, errRunning) {
			return s, err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil, fmt.Errorf("localup (pid %d) did not stop within %s", st.PID, downWait)
}

// cleanUp kills the processes of a run and removes its mounts, containers,
// bridge and directories.
func cleanUp(st *state) error {
	dirs := st.Dirs
	if st.Containerd != nil {
		dirs = append(dirs, st.Containerd.Dir)
	}
	for _, c := range st.Containerds {
		dirs = append(dirs, c.Dir)
	}
	for _, d := range dirs {
		if err := checkOwnDir(d); err != nil {
			return err
		}
	}
	errs := []error{utils.KillProcessesUnder(st.Dirs...)}
	if c := st.Containerd; c != nil {
		errs = append(errs, utils.TeardownContainerdDir(c.Dir, c.Bridge))
	}
	errs = append(errs, cleanUpMultiNode(st))
	for _, cg := range st.Cgroups {
		errs = append(errs, utils.RemoveCgroupTree(cg))
	}
	for _, d := range st.Dirs {
		if err := utils.UnmountUnder(d); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, os.RemoveAll(d))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cleaning up after pid %d: %w", st.PID, err)
	}
	return nil
}

// checkOwnDir refuses a directory that is not one the harness or envtest
// makes (utils.HarnessDirPrefixes).
func checkOwnDir(dir string) error {
	base := filepath.Base(dir)
	if filepath.IsAbs(dir) && filepath.Clean(dir) == dir {
		for _, p := range utils.HarnessDirPrefixes {
			if strings.HasPrefix(base, p) {
				return nil
			}
		}
	}
	return fmt.Errorf("refusing to clean up %q: not a directory a local cluster makes", dir)
}
