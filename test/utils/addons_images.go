package utils

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/nodelet/nodelet/test/utils/imagebuild"
)

// The cluster add-ons' images, built on this machine from the Go module
// proxy and Debian's packages, never pulled: a cluster imports them into
// every node's containerd, and the manifests ask for them with
// imagePullPolicy IfNotPresent.
const (
	// KubeProxyVersion is the Kubernetes version hack/kube-proxy.sh builds.
	KubeProxyVersion = "v1.37.0"
	// KubeProxyImage holds /usr/local/bin/kube-proxy and the host's
	// iptables tools with the nf_tables backend (xtables-nft-multi, as
	// iptables, iptables-save, iptables-restore and their ip6tables
	// twins, and its extensions), with the shared libraries they load and
	// the files they read.
	KubeProxyImage = "nodelet.test/kube-proxy:" + KubeProxyVersion
	// CoreDNSVersion is the CoreDNS module hack/coredns/go.mod requires.
	CoreDNSVersion = "v1.15.0"
	// CoreDNSImage holds /coredns, the static build of hack/coredns: only
	// the plugins a cluster DNS uses.
	CoreDNSImage = "nodelet.test/coredns:" + CoreDNSVersion
)

// AddonImageNames are the images AddonImages builds.
var AddonImageNames = []string{KubeProxyImage, CoreDNSImage}

// addonImageFormat changes whenever the way the add-on images are assembled
// changes, so that archives cached by an older harness are not reused.
const addonImageFormat = "nodelet-addon-image-v1"

// iptablesMulti is the Debian multi-call binary behind iptables-nft and
// ip6tables-nft, and iptablesNames the names kube-proxy runs it by (and the
// -nft names of the same tools).
const iptablesMulti = "/usr/sbin/xtables-nft-multi"

var iptablesNames = []string{
	"iptables", "iptables-save", "iptables-restore",
	"ip6tables", "ip6tables-save", "ip6tables-restore",
	"iptables-nft", "iptables-nft-save", "iptables-nft-restore",
	"ip6tables-nft", "ip6tables-nft-save", "ip6tables-nft-restore",
}

// iptablesExtensions are the iptables extensions (matches and targets),
// which libxtables loads by name from its multiarch directory.
const iptablesExtensions = "/usr/lib/*/xtables/*.so"

// iptablesDataFiles are files the iptables tools read at run time when
// they are there: protocol, service and ethertype names, and the names of
// connection labels.
var iptablesDataFiles = []string{"/etc/protocols", "/etc/services", "/etc/ethertypes", "/etc/xtables/connlabel.conf"}

// addonNSSwitch makes the C library look names up in files only: the image
// has no NSS modules beyond the C library's own.
const addonNSSwitch = "passwd: files\ngroup: files\nhosts: files dns\nprotocols: files\nservices: files\nethers: files\nrpc: files\n"

var addonImageMu sync.Mutex

// AddonImages builds the add-on images (kube-proxy with hack/kube-proxy.sh,
// CoreDNS with hack/coredns.sh, both cached under <cache>/) and returns
// image name → docker-archive. The archives are cached under
// <cache>/images/ by a hash of everything in them, so a second call costs a
// read of the inputs and a changed input (a rebuilt binary, an upgraded
// iptables) builds the image again.
func AddonImages(ctx context.Context) (map[string]string, error) {
	addonImageMu.Lock()
	defer addonImageMu.Unlock()
	out := map[string]string{}
	kubeProxy, err := RunHackScript(ctx, nil, "kube-proxy.sh")
	if err != nil {
		return nil, fmt.Errorf("building kube-proxy: %w", err)
	}
	if out[KubeProxyImage], err = addonArchive(KubeProxyImage, func(l *recordedLayer) (v1.Config, error) {
		return kubeProxyFiles(ctx, l, kubeProxy)
	}); err != nil {
		return nil, err
	}
	coreDNS, err := RunHackScript(ctx, nil, "coredns.sh")
	if err != nil {
		return nil, fmt.Errorf("building CoreDNS: %w", err)
	}
	if out[CoreDNSImage], err = addonArchive(CoreDNSImage, func(l *recordedLayer) (v1.Config, error) {
		return coreDNSFiles(l, coreDNS)
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// addonArchive assembles the one-layer image files describes, and writes
// it unless an archive of the same content is already in the cache.
func addonArchive(image string, files func(*recordedLayer) (v1.Config, error)) (string, error) {
	l := newRecordedLayer()
	cfg, err := files(l)
	if err != nil {
		return "", fmt.Errorf("assembling %s: %w", image, err)
	}
	fmt.Fprintf(l.sum, "config:%q:%q:%q\n", cfg.Entrypoint, cfg.Cmd, cfg.Env)
	key := hex.EncodeToString(l.sum.Sum(nil))
	dir, err := CacheDir("images")
	if err != nil {
		return "", err
	}
	repo := strings.ReplaceAll(image[strings.LastIndex(image, "/")+1:], ":", "-")
	path := filepath.Join(dir, fmt.Sprintf("%s-%s.tar", repo, key[:16]))
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	img, err := fastLayerImage(&l.Layer, cfg)
	if err != nil {
		return "", fmt.Errorf("building %s: %w", image, err)
	}
	return writeImageArchive(path, image, img)
}

// kubeProxyFiles adds kube-proxy, the iptables tools and what they need.
func kubeProxyFiles(ctx context.Context, l *recordedLayer, kubeProxy string) (v1.Config, error) {
	cfg := v1.Config{
		Entrypoint: []string{"/usr/local/bin/kube-proxy"},
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	}
	for _, d := range []string{"etc", "run", "usr", "usr/local", "usr/local/bin", "usr/sbin", "var", "var/lib"} {
		l.dir(d, 0o755)
	}
	l.dir("tmp", 0o1777)
	bin, err := os.ReadFile(kubeProxy)
	if err != nil {
		return cfg, fmt.Errorf("reading kube-proxy: %w", err)
	}
	l.file("usr/local/bin/kube-proxy", 0o755, bin)

	// The iptables tools: Debian's multi-call binary under the names
	// kube-proxy runs, pointing straight at it rather than through the
	// host's alternatives, so the image's iptables is nf_tables whatever
	// the host chose.
	if err := l.addHost(iptablesMulti); err != nil {
		return cfg, fmt.Errorf("copying iptables (Debian package iptables): %w", err)
	}
	for _, n := range iptablesNames {
		l.symlink("usr/sbin/"+n, filepath.Base(iptablesMulti))
	}
	extensions, err := filepath.Glob(iptablesExtensions)
	if err != nil {
		return cfg, fmt.Errorf("finding the iptables extensions: %w", err)
	}
	if len(extensions) == 0 {
		return cfg, fmt.Errorf("no iptables extensions at %s (Debian package iptables)", iptablesExtensions)
	}
	sort.Strings(extensions)
	for _, f := range extensions {
		if err := l.addHost(f); err != nil {
			return cfg, err
		}
	}
	for _, b := range append([]string{kubeProxy, iptablesMulti}, extensions...) {
		libs, err := sharedLibraries(ctx, b)
		if err != nil {
			return cfg, err
		}
		for _, lib := range libs {
			if err := l.addHost(lib); err != nil {
				return cfg, err
			}
		}
	}
	for _, f := range iptablesDataFiles {
		if _, err := os.Stat(f); err != nil {
			continue
		}
		if err := l.addHost(f); err != nil {
			return cfg, err
		}
	}
	l.file("etc/nsswitch.conf", 0o644, []byte(addonNSSwitch))
	l.file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\n"))
	l.file("etc/group", 0o644, []byte("root:x:0:\n"))
	return cfg, nil
}

// coreDNSFiles adds CoreDNS, a static binary.
func coreDNSFiles(l *recordedLayer, coreDNS string) (v1.Config, error) {
	cfg := v1.Config{
		Entrypoint:   []string{"/coredns"},
		ExposedPorts: map[string]struct{}{"53/tcp": {}, "53/udp": {}},
	}
	for _, d := range []string{"etc", "etc/coredns"} {
		l.dir(d, 0o755)
	}
	l.dir("tmp", 0o1777)
	bin, err := os.ReadFile(coreDNS)
	if err != nil {
		return cfg, fmt.Errorf("reading CoreDNS: %w", err)
	}
	l.file("coredns", 0o755, bin)
	l.file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"))
	l.file("etc/group", 0o644, []byte("root:x:0:\nnobody:x:65534:\n"))
	return cfg, nil
}

// recordedLayer is an image layer that also digests what is added to it,
// in order, so that the layer's content names its cached archive.
type recordedLayer struct {
	imagebuild.Layer
	sum  hash.Hash
	seen map[string]bool
}

func newRecordedLayer() *recordedLayer {
	l := &recordedLayer{sum: sha256.New(), seen: map[string]bool{}}
	fmt.Fprintln(l.sum, addonImageFormat)
	return l
}

func (l *recordedLayer) dir(path string, mode int64) {
	if l.seen[path] {
		return
	}
	l.seen[path] = true
	fmt.Fprintf(l.sum, "dir:%s:%o\n", path, mode)
	l.Dir(path, mode)
}

func (l *recordedLayer) file(path string, mode int64, data []byte) {
	if l.seen[path] {
		return
	}
	l.seen[path] = true
	fmt.Fprintf(l.sum, "file:%s:%o:%d:", path, mode, len(data))
	l.sum.Write(data)
	l.Layer.File(path, mode, data)
}

func (l *recordedLayer) symlink(path, target string) {
	if l.seen[path] {
		return
	}
	l.seen[path] = true
	fmt.Fprintf(l.sum, "symlink:%s:%s\n", path, target)
	l.Symlink(path, target)
}

// maxSymlinks bounds the symbolic links addHost follows for one path.
const maxSymlinks = 40

// addHost copies the host's file at path into the layer at the same path,
// with every directory above it and every symbolic link on the way (such
// as Debian's /lib -> usr/lib and the loader's link), so that the path
// resolves in the image as it does on the host.
func (l *recordedLayer) addHost(path string) error {
	for range maxSymlinks {
		next, err := l.addHostStep(path)
		if err != nil || next == "" {
			return err
		}
		path = next
	}
	return fmt.Errorf("copying %s: more than %d symbolic links", path, maxSymlinks)
}

// addHostStep adds path's components up to the first symbolic link, and
// returns the path that link leads to ("" when path is added).
func (l *recordedLayer) addHostStep(path string) (string, error) {
	parts := strings.Split(strings.TrimPrefix(filepath.Clean(path), "/"), "/")
	cur := "/"
	for i, part := range parts {
		next := filepath.Join(cur, part)
		rel := strings.TrimPrefix(next, "/")
		fi, err := os.Lstat(next)
		if err != nil {
			return "", fmt.Errorf("copying %s: %w", path, err)
		}
		last := i == len(parts)-1
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(next)
			if err != nil {
				return "", fmt.Errorf("copying %s: %w", path, err)
			}
			l.symlink(rel, target)
			if !filepath.IsAbs(target) {
				target = filepath.Join(cur, target)
			}
			return filepath.Join(append([]string{target}, parts[i+1:]...)...), nil
		case fi.IsDir():
			l.dir(rel, int64(fi.Mode().Perm()))
		case fi.Mode().IsRegular() && last:
			data, err := os.ReadFile(next)
			if err != nil {
				return "", fmt.Errorf("copying %s: %w", path, err)
			}
			l.file(rel, int64(fi.Mode().Perm()), data)
		default:
			return "", fmt.Errorf("copying %s: %s is neither a directory, a regular file nor a symbolic link", path, next)
		}
		cur = next
	}
	return "", nil
}

// UnpackImage writes the file system of image, read from its docker-archive
// at archive, under dir (which must exist): directories, regular files and
// symbolic links, with their modes; owners are left as the caller's.
func UnpackImage(archive, image, dir string) error {
	tag, err := name.NewTag(image)
	if err != nil {
		return fmt.Errorf("parsing image name %s: %w", image, err)
	}
	img, err := imagebuild.ReadArchive(archive, tag)
	if err != nil {
		return err
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the file system of %s: %w", image, err)
		}
		if err := unpackEntry(dir, hdr, tr); err != nil {
			return fmt.Errorf("unpacking %s: %w", image, err)
		}
	}
}

func unpackEntry(dir string, hdr *tar.Header, r io.Reader) error {
	rel := filepath.Clean("/" + hdr.Name)
	target := filepath.Join(dir, rel)
	mode := hdr.FileInfo().Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return fmt.Errorf("creating the directory of %s: %w", rel, err)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", rel, err)
		}
		return os.Chmod(target, mode)
	case tar.TypeReg:
		f, err := os.OpenFile(target, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
		if err != nil {
			return fmt.Errorf("creating %s: %w", rel, err)
		}
		if _, err := io.Copy(f, r); err != nil {
			f.Close()
			return fmt.Errorf("writing %s: %w", rel, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("writing %s: %w", rel, err)
		}
		return os.Chmod(target, mode)
	case tar.TypeSymlink:
		return os.Symlink(hdr.Linkname, target)
	default:
		return fmt.Errorf("%s: unsupported entry type %q", rel, hdr.Typeflag)
	}
}

// HostProgramsLayer returns an image layer holding each of the host's
// programs with the shared libraries ldd lists for it, and each of the
// host's files, every one at the path it has on the host with the
// directories above it and the symbolic links on the way (as the add-on
// images copy theirs), and a digest of the layer's content that changes
// whenever a copied file does (to name a cached image by).
func HostProgramsLayer(ctx context.Context, programs, files []string) (*imagebuild.Layer, string, error) {
	l := newRecordedLayer()
	for _, p := range programs {
		if err := l.addHost(p); err != nil {
			return nil, "", err
		}
		libs, err := sharedLibraries(ctx, p)
		if err != nil {
			return nil, "", err
		}
		for _, lib := range libs {
			if err := l.addHost(lib); err != nil {
				return nil, "", err
			}
		}
	}
	for _, f := range files {
		if err := l.addHost(f); err != nil {
			return nil, "", err
		}
	}
	return &l.Layer, hex.EncodeToString(l.sum.Sum(nil)), nil
}
