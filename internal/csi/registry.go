package csi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	utilversion "k8s.io/apimachinery/pkg/util/version"
)

// Registry holds the CSI drivers registered on this node: each driver's
// endpoint, the versions it announced, and the registration socket it came
// from. Drivers on one endpoint share one gRPC connection, closed when the
// last of them is deregistered. It is safe for concurrent use.
type Registry struct {
	mu      sync.Mutex
	drivers map[string]*registeredDriver
	conns   map[string]*sharedConn
	// dial opens a connection to an endpoint; tests replace it to count.
	dial func(endpoint string) (*grpc.ClientConn, error)
	// caps remembers drivers' node capabilities until they register again.
	caps capsCache
}

var _ Drivers = (*Registry)(nil)

// RegisteredDriver describes one registered driver.
type RegisteredDriver struct {
	// Name is the driver's name, as pods' CSI volumes and PVs name it.
	Name string
	// Endpoint is the driver's CSI socket.
	Endpoint string
	// Versions are the versions the driver announced at registration.
	Versions []string
	// Socket is the registration socket the driver was registered from.
	Socket string
}

type registeredDriver struct {
	RegisteredDriver
	highest *utilversion.Version
}

type sharedConn struct {
	conn *grpc.ClientConn
	refs int
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{
		drivers: map[string]*registeredDriver{},
		conns:   map[string]*sharedConn{},
		dial:    dialEndpoint,
	}
}

// NodeClient returns the node service of the named driver, over the
// connection the registry keeps to its endpoint.
func (r *Registry) NodeClient(_ context.Context, driver string) (csipb.NodeClient, error) {
	conn, err := r.conn(driver)
	if err != nil {
		return nil, err
	}
	return csipb.NewNodeClient(conn), nil
}

// Driver returns the registered driver of that name.
func (r *Registry) Driver(name string) (RegisteredDriver, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.drivers[name]
	if !ok {
		return RegisteredDriver{}, false
	}
	out := d.RegisteredDriver
	out.Versions = slices.Clone(out.Versions)
	return out, true
}

// Names returns the names of the registered drivers, sorted.
func (r *Registry) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.drivers))
	for n := range r.drivers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (r *Registry) conn(driver string) (*grpc.ClientConn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.drivers[driver]
	if !ok {
		// The kubelet's text, which events and pod conditions carry.
		return nil, fmt.Errorf("driver name %s not found in the list of registered CSI drivers", driver)
	}
	return r.conns[d.Endpoint].conn, nil
}

// validate checks a driver's registration as the kubelet does: a name, a
// non-empty list of versions of which the highest is a 1.x, and no driver of
// that name from another registration socket with a higher version. It
// returns the highest version.
func (r *Registry) validate(name, endpoint, socket string, versions []string) (*utilversion.Version, error) {
	if name == "" {
		return nil, fmt.Errorf("validation failed for CSI Driver at endpoint %s: empty driver name", endpoint)
	}
	highest, err := highestVersion(name, versions)
	if err != nil {
		return nil, fmt.Errorf("validation failed for CSI Driver %s at endpoint %s: %w", name, endpoint, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.drivers[name]; ok && old.Socket != socket && old.highest.GreaterThan(highest) {
		return nil, fmt.Errorf("validation failed for CSI Driver %s at endpoint %s: %s",
			name, endpoint, logText("ValidatePlugin for CSI driver %q failed. Another driver with the same name is already registered with a higher supported version: %q",
				name, old.highest))
	}
	return highest, nil
}

// highestVersion returns the highest 1.x version of versions, with the
// kubelet's errors.
func highestVersion(name string, versions []string) (*utilversion.Version, error) {
	if len(versions) == 0 {
		return nil, errors.New(logText("ValidatePlugin for CSI driver %q failed. Plugin returned an empty list for supported versions", name))
	}
	v, err := utilversion.HighestSupportedVersion(versions)
	if err != nil {
		return nil, errors.New(logText("ValidatePlugin for CSI driver %q failed. None of the versions specified %q are supported. err=%v", name, versions, err))
	}
	return v, nil
}

// logText prefixes a message as the kubelet's CSI plugin does.
func logText(format string, args ...any) string {
	return "kubernetes.io/csi: " + fmt.Sprintf(format, args...)
}

// add registers d (replacing a driver of the same name) and opens, or
// shares, the connection to its endpoint.
func (r *Registry) add(d RegisteredDriver, highest *utilversion.Version) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	sc, ok := r.conns[d.Endpoint]
	if !ok {
		conn, err := r.dial(d.Endpoint)
		if err != nil {
			return fmt.Errorf("connecting to CSI driver %s at %s: %w", d.Name, d.Endpoint, err)
		}
		sc = &sharedConn{conn: conn}
		r.conns[d.Endpoint] = sc
	}
	sc.refs++
	if old, ok := r.drivers[d.Name]; ok {
		r.releaseLocked(old.Endpoint)
	}
	d.Versions = slices.Clone(d.Versions)
	r.drivers[d.Name] = &registeredDriver{RegisteredDriver: d, highest: highest}
	r.caps.forget(d.Name)
	return nil
}

// remove deregisters the named driver if it is registered from socket (a
// driver registered again from another socket stays). It says whether the
// driver was removed.
func (r *Registry) remove(name, socket string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.drivers[name]
	if !ok || d.Socket != socket {
		return false
	}
	delete(r.drivers, name)
	r.releaseLocked(d.Endpoint)
	r.caps.forget(name)
	return true
}

func (r *Registry) releaseLocked(endpoint string) {
	sc, ok := r.conns[endpoint]
	if !ok {
		return
	}
	sc.refs--
	if sc.refs <= 0 {
		_ = sc.conn.Close()
		delete(r.conns, endpoint)
	}
}

// Close deregisters every driver and closes their connections.
func (r *Registry) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, sc := range r.conns {
		_ = sc.conn.Close()
	}
	r.conns = map[string]*sharedConn{}
	r.drivers = map[string]*registeredDriver{}
	r.caps.forgetAll()
}

// socketPath turns an endpoint ("/path", "unix:///path" or "unix:/path")
// into the path of its unix socket.
func socketPath(endpoint string) string {
	if p, ok := strings.CutPrefix(endpoint, "unix://"); ok {
		return p
	}
	if p, ok := strings.CutPrefix(endpoint, "unix:"); ok {
		return p
	}
	return endpoint
}

// dialEndpoint makes a client connection to a unix socket endpoint. It does
// not connect until the first call.
func dialEndpoint(endpoint string) (*grpc.ClientConn, error) {
	path := socketPath(endpoint)
	return grpc.NewClient("passthrough:///"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", addr)
		}))
}
