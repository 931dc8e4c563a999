package hostpath

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	mount "k8s.io/mount-utils"
)

const (
	// DefaultDriverName is the name the driver reports unless told.
	DefaultDriverName = "hostpath.csi.nodelet.test"
	// TopologyKey is the topology segment that pins volumes to the node.
	TopologyKey = "topology.hostpath.csi.nodelet.test/node"
	// EphemeralContextKey marks a CSI ephemeral inline volume in the
	// volume context of NodePublishVolume.
	EphemeralContextKey = "csi.storage.k8s.io/ephemeral"
	// PublishContextKey is set in the publish context ControllerPublish
	// returns; it names the node the volume was published to.
	PublishContextKey = "hostpath.csi.nodelet.test/node"
	// stateFile holds the volumes' records inside the state directory.
	stateFile = "state.json"
	// Version is what GetPluginInfo reports as vendor_version.
	Version = "0.1.0"
)

// Config is the driver's command line.
type Config struct {
	// Endpoint is unix:///path/to/socket (or a plain path).
	Endpoint string
	// DriverName is reported by GetPluginInfo; DefaultDriverName when empty.
	DriverName string
	// NodeID is this node's id in NodeGetInfo and the topology.
	NodeID string
	// StateDir holds a directory per volume and the driver's records.
	StateDir string
	// MaxVolumesPerNode is reported by NodeGetInfo and enforced by
	// ControllerPublishVolume; 0 is no limit.
	MaxVolumesPerNode int64
	// AttachRequired advertises PUBLISH_UNPUBLISH_VOLUME.
	AttachRequired bool
	// CallLog, when set, is a file that gets a JSON line per call.
	CallLog string
}

// volume is the driver's record of one volume.
type volume struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Capacity  int64  `json:"capacity"`
	Ephemeral bool   `json:"ephemeral,omitempty"`
	// Block is a raw block volume: an image file behind a loop device.
	Block bool `json:"block,omitempty"`
	// PublishedNode is the node ControllerPublish attached it to.
	PublishedNode string `json:"publishedNode,omitempty"`
	// Staged and Published are the paths it is mounted at.
	Staged    []string `json:"staged,omitempty"`
	Published []string `json:"published,omitempty"`
}

// Driver serves the three CSI services.
type Driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer

	cfg     Config
	mounter mount.Interface
	log     *callLog

	mu      sync.Mutex
	volumes map[string]*volume
}

// New checks cfg, creates the state directory and loads the records a
// previous run left there.
func New(cfg Config) (*Driver, error) {
	if cfg.DriverName == "" {
		cfg.DriverName = DefaultDriverName
	}
	if cfg.NodeID == "" {
		return nil, errors.New("a node id is required")
	}
	if cfg.StateDir == "" {
		return nil, errors.New("a state directory is required")
	}
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the state directory: %w", err)
	}
	d := &Driver{cfg: cfg, mounter: mount.NewWithoutSystemd(""), volumes: map[string]*volume{}}
	if err := d.load(); err != nil {
		return nil, err
	}
	return d, nil
}

// Run serves on cfg.Endpoint until ctx ends, then stops the server and
// removes the socket.
func (d *Driver) Run(ctx context.Context) error {
	socket, err := SocketPath(d.cfg.Endpoint)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(socket), 0o755); err != nil {
		return fmt.Errorf("creating the socket directory: %w", err)
	}
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing a stale socket: %w", err)
	}
	lis, err := net.Listen("unix", socket)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", socket, err)
	}
	log, err := openCallLog(d.cfg.CallLog)
	if err != nil {
		_ = lis.Close()
		return err
	}
	d.log = log
	srv := grpc.NewServer(grpc.UnaryInterceptor(log.interceptor))
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterControllerServer(srv, d)
	csi.RegisterNodeServer(srv, d)
	klog.InfoS("Serving CSI", "driver", d.cfg.DriverName, "node", d.cfg.NodeID, "endpoint", socket)
	errs := make(chan error, 1)
	go func() { errs <- srv.Serve(lis) }()
	select {
	case <-ctx.Done():
		srv.GracefulStop()
		err = nil
	case err = <-errs:
	}
	_ = os.Remove(socket)
	if cerr := log.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("serving CSI: %w", err)
	}
	return nil
}

// SocketPath turns unix:///path, unix:/path or /path into the path.
func SocketPath(endpoint string) (string, error) {
	if !strings.Contains(endpoint, "://") && !strings.HasPrefix(endpoint, "unix:") {
		if endpoint == "" {
			return "", errors.New("an endpoint is required")
		}
		return endpoint, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("parsing endpoint %q: %w", endpoint, err)
	}
	if u.Scheme != "unix" {
		return "", fmt.Errorf("endpoint %q: only unix sockets are served", endpoint)
	}
	p := u.Path
	if p == "" {
		p = u.Opaque
	}
	if u.Host != "" {
		p = u.Host + p
	}
	if p == "" {
		return "", fmt.Errorf("endpoint %q names no socket", endpoint)
	}
	return p, nil
}

// volumeID is the id of the volume CreateVolume makes for name: the same
// name always gives the same id, which keeps CreateVolume idempotent even
// across a crash between making the directory and saving the records.
func volumeID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "vol-" + hex.EncodeToString(sum[:12])
}

// volumePath is the directory that holds a volume's data.
func (d *Driver) volumePath(id string) string {
	return filepath.Join(d.cfg.StateDir, id)
}

// validID refuses ids that would leave the state directory.
func validID(id string) bool {
	return id != "" && id != "." && id != ".." && id != stateFile && !strings.ContainsAny(id, "/\x00")
}

func (d *Driver) load() error {
	data, err := os.ReadFile(filepath.Join(d.cfg.StateDir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the driver's records: %w", err)
	}
	var vols []*volume
	if err := json.Unmarshal(data, &vols); err != nil {
		return fmt.Errorf("decoding the driver's records: %w", err)
	}
	for _, v := range vols {
		d.volumes[v.ID] = v
	}
	return nil
}

// saveLocked writes the records; d.mu must be held.
func (d *Driver) saveLocked() error {
	vols := make([]*volume, 0, len(d.volumes))
	for _, v := range d.volumes {
		vols = append(vols, v)
	}
	data, err := json.MarshalIndent(vols, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the driver's records: %w", err)
	}
	name := filepath.Join(d.cfg.StateDir, stateFile)
	if err := os.WriteFile(name+".tmp", data, 0o644); err != nil {
		return fmt.Errorf("writing the driver's records: %w", err)
	}
	if err := os.Rename(name+".tmp", name); err != nil {
		return fmt.Errorf("writing the driver's records: %w", err)
	}
	return nil
}
