package certificates

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	certutil "k8s.io/client-go/util/cert"
)

// ReloadPeriod is how often the serving certificate's files and the client
// CA bundle are read again for changes, and how often a self-signed
// certificate is checked for its expiry and the node's addresses.
const ReloadPeriod = 15 * time.Second

// fileWatcher reads a set of files each time it is asked to and, when
// their content changed since it last tried them, hands it to load. load
// parses it and keeps it, or returns an error: what was loaded before then
// stays in use, and the same content is not tried again until it changes.
type fileWatcher struct {
	files []string
	load  func(contents [][]byte) error

	mu      sync.Mutex
	last    fingerprint
	lastErr string
}

// read returns the content of the watcher's files.
func (w *fileWatcher) read() ([][]byte, error) {
	contents := make([][]byte, 0, len(w.files))
	for _, f := range w.files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		contents = append(contents, data)
	}
	return contents, nil
}

// check reads the files and loads them when they changed. loaded says
// whether new content is in use; err is the reason it is not, reported
// once per reason (nil while nothing is new).
func (w *fileWatcher) check() (loaded bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	contents, readErr := w.read()
	cur, readErrText := fingerprint{}, ""
	if readErr != nil {
		readErrText = readErr.Error()
	} else {
		cur = fingerprintOf(contents)
	}
	switch reloadDecision(w.last, cur, readErrText, w.lastErr) {
	case reloadReportReadError:
		w.lastErr = readErrText
		return false, readErr
	case reloadLoad:
		w.last, w.lastErr = cur, ""
		if err := w.load(contents); err != nil {
			return false, err
		}
		return true, nil
	}
	if readErr == nil {
		w.lastErr = ""
	}
	return false, nil
}

// runEvery calls f every period until ctx ends, the first time a period
// from now (the caller has just read the files).
func runEvery(ctx context.Context, period time.Duration, f func()) {
	_ = wait.PollUntilContextCancel(ctx, period, false, func(context.Context) (bool, error) {
		f()
		return false, nil
	})
}

// ClientCAs is the CA bundle of server.clientCAFile, read again when the
// file changes. A bundle that no longer loads is logged and the last good
// one kept. It is a manager.Runnable: add it to the manager so that the
// file is watched.
type ClientCAs struct {
	path   string
	log    logr.Logger
	period time.Duration
	pool   atomic.Pointer[x509.CertPool]
	w      *fileWatcher
}

// NewClientCAs reads the CA bundle at path, which must load.
func NewClientCAs(path string, log logr.Logger) (*ClientCAs, error) {
	c := &ClientCAs{path: path, log: log, period: ReloadPeriod}
	c.w = &fileWatcher{files: []string{path}, load: func(contents [][]byte) error {
		pool, err := certutil.NewPoolFromBytes(contents[0])
		if err != nil {
			return err
		}
		c.pool.Store(pool)
		return nil
	}}
	if _, err := c.w.check(); err != nil {
		return nil, fmt.Errorf("loading client CA file %s: %w", path, err)
	}
	if c.pool.Load() == nil {
		return nil, fmt.Errorf("loading client CA file %s: no certificates", path)
	}
	return c, nil
}

// Pool returns the CA bundle in use.
func (c *ClientCAs) Pool() *x509.CertPool { return c.pool.Load() }

// Check reads the file again and uses it when it changed and loads.
func (c *ClientCAs) Check() {
	loaded, err := c.w.check()
	if err != nil {
		c.log.Error(err, "Keeping the previous client CA bundle: the changed file does not load", "file", c.path)
		return
	}
	if loaded {
		c.log.Info("Loaded the changed client CA bundle", "file", c.path)
	}
}

// Start watches the file until ctx ends.
func (c *ClientCAs) Start(ctx context.Context) error {
	runEvery(ctx, c.period, c.Check)
	return nil
}

// NeedLeaderElection is false: every node watches its own files.
func (c *ClientCAs) NeedLeaderElection() bool { return false }

// keyPairFiles is a serving certificate and key read from files (server.
// tlsCertFile and tlsPrivateKeyFile), read again when they change. A pair
// that no longer loads, or whose key does not match, is logged and the
// last good one kept.
type keyPairFiles struct {
	certFile, keyFile string
	cert              atomic.Pointer[tls.Certificate]
	w                 *fileWatcher
}

func newKeyPairFiles(certFile, keyFile string) (*keyPairFiles, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("server.tlsCertFile and server.tlsPrivateKeyFile must be set together")
	}
	p := &keyPairFiles{certFile: certFile, keyFile: keyFile}
	p.w = &fileWatcher{files: []string{certFile, keyFile}, load: func(contents [][]byte) error {
		c, err := tls.X509KeyPair(contents[0], contents[1])
		if err != nil {
			return err
		}
		p.cert.Store(&c)
		return nil
	}}
	if _, err := p.w.check(); err != nil {
		return nil, fmt.Errorf("loading serving certificate %s: %w", certFile, err)
	}
	return p, nil
}
