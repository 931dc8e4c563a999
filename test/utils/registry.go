package utils

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// RegistryOptions tune StartRegistry.
type RegistryOptions struct {
	// User and Password, when User is set, are the only credentials the
	// registry accepts (htpasswd, bcrypt); every request without them gets
	// 401. With User empty the registry is open.
	User, Password string
	// StartTimeout bounds the wait for the registry to answer; 30s when zero.
	StartTimeout time.Duration
}

// Registry is a docker-registry (distribution 2.8) serving plain HTTP on a
// free port of 127.0.0.1, with its storage under a temporary directory.
type Registry struct {
	// Dir is the temporary directory holding its config, storage and log.
	Dir string

	opts    RegistryOptions
	host    string
	logPath string

	mu      sync.Mutex
	proc    *daemon
	stopped bool
}

// StartRegistry starts a registry on loopback and waits until it answers.
// Containerd pulls from it over plain HTTP once told with
// Containerd.AddInsecureRegistry(r.Host()) (or ContainerdOptions.InsecureRegistries).
func StartRegistry(ctx context.Context, opts RegistryOptions) (_ *Registry, err error) {
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 30 * time.Second
	}
	if err := ensureDeps(ctx, "docker-registry", "htpasswd"); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "nodelet-registry-")
	if err != nil {
		return nil, fmt.Errorf("creating registry directory: %w", err)
	}
	r := &Registry{Dir: dir, opts: opts, logPath: filepath.Join(dir, "registry.log")}
	defer func() {
		if err != nil {
			_ = r.Stop()
		}
	}()
	auth := ""
	if opts.User != "" {
		out, err := exec.CommandContext(ctx, "htpasswd", "-Bbn", opts.User, opts.Password).Output()
		if err != nil {
			return r, fmt.Errorf("hashing the registry password with htpasswd: %w", err)
		}
		htpasswd := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(htpasswd, out, 0o600); err != nil {
			return r, fmt.Errorf("writing htpasswd: %w", err)
		}
		auth = fmt.Sprintf("auth:\n  htpasswd:\n    realm: nodelet-test\n    path: %s\n", htpasswd)
	}
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)

	// The port is free when we ask and taken by the registry a moment later;
	// another process may win it in between, so try a few.
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return r, err
		}
		r.host = fmt.Sprintf("127.0.0.1:%d", port)
		config := fmt.Sprintf(`version: 0.1
log:
  level: info
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
  secret: %s
%s`, filepath.Join(dir, "data"), r.host, hex.EncodeToString(secret), auth)
		cfgPath := filepath.Join(dir, "config.yml")
		if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
			return r, fmt.Errorf("writing registry config: %w", err)
		}
		err = r.start(ctx, cfgPath)
		if err == nil {
			return r, nil
		}
		// Retry only when the registry exited (the port was taken); one that
		// runs but does not answer is an error of its own.
		if attempt == 3 || r.Running() {
			return r, err
		}
	}
}

// Host is "127.0.0.1:PORT", the registry part of image references.
func (r *Registry) Host() string { return r.host }

// Running reports whether the registry process is up.
func (r *Registry) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc != nil
}

// FreePort asks the kernel for a free TCP port on loopback.
func FreePort() (int, error) { return freePort() }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (r *Registry) start(ctx context.Context, cfgPath string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	logFile, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening registry log: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command("docker-registry", "serve", cfgPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = r.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	d, err := startLocked(cmd)
	if err != nil {
		return fmt.Errorf("starting docker-registry: %w", err)
	}
	r.proc = d

	ctx, cancel := context.WithTimeout(ctx, r.opts.StartTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	want := http.StatusOK
	if r.opts.User != "" {
		want = http.StatusUnauthorized
	}
	var last error
	for {
		select {
		case <-d.done:
			r.proc = nil
			log, _ := os.ReadFile(r.logPath)
			return fmt.Errorf("docker-registry exited: %w\n%s", d.err, LastBytes(string(log), 2000))
		case <-ctx.Done():
			return fmt.Errorf("waiting for the registry on %s: %w (last: %w)", r.host, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
		resp, err := client.Get("http://" + r.host + "/v2/")
		if err != nil {
			last = err
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == want {
			return nil
		}
		last = fmt.Errorf("GET /v2/: %s, want %d", resp.Status, want)
	}
}

// Push copies one of the TestImages into the registry, under the same path
// and tag without the nodelet.test domain, and returns the reference to pull:
// Push(ctx, BusyboxImage) gives "127.0.0.1:PORT/busybox:1.35".
func (r *Registry) Push(ctx context.Context, image string) (string, error) {
	img, err := LoadImage(ctx, image)
	if err != nil {
		return "", err
	}
	return r.PushImage(ctx, image, img)
}

// PushVariant pushes image as Push does, with the config label
// e2e.nodelet.io/variant=variant, which gives it an image ID of its own:
// the node does not take it for the image the harness preloads (a node
// that pulled an image with credentials verifies the credentials of every
// pod that uses that image ID, under any name).
func (r *Registry) PushVariant(ctx context.Context, image, variant string) (string, error) {
	img, err := LoadImage(ctx, image)
	if err != nil {
		return "", err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return "", fmt.Errorf("reading the config of %s: %w", image, err)
	}
	cfg = cfg.DeepCopy()
	if cfg.Config.Labels == nil {
		cfg.Config.Labels = map[string]string{}
	}
	cfg.Config.Labels["e2e.nodelet.io/variant"] = variant
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return "", fmt.Errorf("labelling %s: %w", image, err)
	}
	return r.PushImage(ctx, image, img)
}

// PushImage writes img into the registry under the repository path and tag
// of image, without its domain, and returns the reference to pull:
// "registry.k8s.io/e2e-test-images/kitten:1.8" is served as
// "127.0.0.1:PORT/e2e-test-images/kitten:1.8", which is also where a
// containerd that mirrors registry.k8s.io to this registry looks for it.
func (r *Registry) PushImage(ctx context.Context, image string, img v1.Image) (string, error) {
	src, err := name.NewTag(image)
	if err != nil {
		return "", fmt.Errorf("parsing image name %s: %w", image, err)
	}
	ref := fmt.Sprintf("%s/%s:%s", r.host, src.RepositoryStr(), src.TagStr())
	dst, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		return "", fmt.Errorf("parsing image name %s: %w", ref, err)
	}
	opts := []remote.Option{remote.WithContext(ctx)}
	if r.opts.User != "" {
		opts = append(opts, remote.WithAuth(&authn.Basic{Username: r.opts.User, Password: r.opts.Password}))
	}
	if err := remote.Write(dst, img, opts...); err != nil {
		return "", fmt.Errorf("pushing %s to %s: %w", image, ref, err)
	}
	return ref, nil
}

// Stop stops the registry and removes its directory. Safe to call twice.
func (r *Registry) Stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil
	}
	r.stopped = true
	var errs []error
	if d := r.proc; d != nil {
		r.proc = nil
		_ = syscall.Kill(d.pid, syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(d.pid, syscall.SIGKILL)
			select {
			case <-d.done:
			case <-time.After(5 * time.Second):
				errs = append(errs, fmt.Errorf("docker-registry pid %d did not exit", d.pid))
			}
		}
	}
	if strings.HasPrefix(filepath.Base(r.Dir), "nodelet-registry-") {
		if err := os.RemoveAll(r.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stopping registry %s: %w", r.host, err)
	}
	return nil
}
