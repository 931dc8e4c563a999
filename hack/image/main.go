package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/test/utils/imagebuild"
)

// versionPackage is where -ldflags -X sets nodelet's version.
const versionPackage = "github.com/nodelet/nodelet/internal/version.Version"

// kustomization is where config/default names nodelet's image.
const kustomization = "config/default/kustomization.yaml"

type options struct {
	output  string
	tag     string
	version string
	arch    string
	epoch   time.Time
	// trimpath leaves the build machine's paths out of the binary.
	trimpath bool
	// buildTags are go build's -tags.
	buildTags string
}

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	opts, err := parse(args)
	if err != nil {
		return err
	}
	start := time.Now()
	bin, err := compile(ctx, opts)
	if err != nil {
		return err
	}
	img, err := assemble(bin, opts)
	if err != nil {
		return err
	}
	if err := write(img, opts); err != nil {
		return err
	}
	return report(img, opts, time.Since(start))
}

func parse(args []string) (options, error) {
	flags := flag.NewFlagSet("image", flag.ContinueOnError)
	var o options
	var epoch int64
	flags.StringVar(&o.output, "output", "bin/nodelet-image.tar", "docker-archive tarball to write")
	flags.StringVar(&o.tag, "tag", "", "image name and tag (default: the nodelet image of "+kustomization+")")
	flags.StringVar(&o.version, "version", "v0.1.0-dev", "nodelet's version, compiled into the binary")
	flags.StringVar(&o.arch, "arch", runtime.GOARCH, "GOARCH of the image")
	flags.StringVar(&o.buildTags, "build-tags", "grpcnotrace", "go build's -tags, comma-separated (the Makefile's GO_TAGS; grpcnotrace leaves out gRPC's request tracing, see the Makefile)")
	flags.BoolVar(&o.trimpath, "trimpath", true, "leave the build machine's file paths out of the binary, so that other machines build the same image (false reuses the packages an ordinary build of nodelet compiled)")
	flags.Int64Var(&epoch, "epoch", sourceDateEpoch(), "time stamp of the files and the image, Unix seconds (default $SOURCE_DATE_EPOCH, else 0)")
	if err := flags.Parse(args); err != nil {
		return options{}, err
	}
	if flags.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	o.epoch = time.Unix(epoch, 0).UTC()
	if o.tag == "" {
		tag, err := deployedImage(kustomization)
		if err != nil {
			return options{}, err
		}
		o.tag = tag
	}
	return o, nil
}

// sourceDateEpoch is $SOURCE_DATE_EPOCH, or 0, so that the same sources
// give the same image digest.
func sourceDateEpoch() int64 {
	n, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// deployedImage returns newName:newTag of the "nodelet" entry of a
// kustomization's images.
func deployedImage(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the deployed image name: %w", err)
	}
	var k struct {
		Images []struct {
			Name    string `json:"name"`
			NewName string `json:"newName"`
			NewTag  string `json:"newTag"`
		} `json:"images"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		return "", fmt.Errorf("decoding %s: %w", path, err)
	}
	for _, i := range k.Images {
		if i.Name == "nodelet" && i.NewName != "" && i.NewTag != "" {
			return i.NewName + ":" + i.NewTag, nil
		}
	}
	return "", fmt.Errorf("%s has no images entry for nodelet with newName and newTag", path)
}

// compile builds nodelet statically for linux/<arch> and returns the binary.
func compile(ctx context.Context, o options) ([]byte, error) {
	dir, err := os.MkdirTemp("", "nodelet-image-")
	if err != nil {
		return nil, fmt.Errorf("creating build directory: %w", err)
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "nodelet")
	args := []string{"build", "-ldflags", "-s -w -X " + versionPackage + "=" + o.version, "-tags=" + o.buildTags, "-o", out}
	if o.trimpath {
		args = append(args, "-trimpath")
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./cmd")...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("compiling nodelet: %w", err)
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("reading the nodelet binary: %w", err)
	}
	return bin, nil
}

// assemble makes the one-layer image: /nodelet as entrypoint, /tmp.
func assemble(bin []byte, o options) (v1.Image, error) {
	return imagebuild.Single(rootfs(bin), o.arch, o.epoch, v1.Config{
		Entrypoint: []string{"/nodelet"},
		WorkingDir: "/",
		Labels: map[string]string{
			"org.opencontainers.image.title":   "nodelet",
			"org.opencontainers.image.version": o.version,
			"org.opencontainers.image.source":  "https://github.com/nodelet/nodelet",
		},
	})
}

// rootfs is the layer: /tmp (1777) and /nodelet (0755), owned by root.
func rootfs(bin []byte) *imagebuild.Layer {
	var l imagebuild.Layer
	l.Dir("tmp", 0o1777)
	l.File("nodelet", 0o755, bin)
	return &l
}

// write saves the image as a docker-archive tarball tagged o.tag, through
// a temporary file so that a failed build leaves no half-written archive.
func write(img v1.Image, o options) error {
	tag, err := name.NewTag(o.tag)
	if err != nil {
		return fmt.Errorf("parsing image name %q: %w", o.tag, err)
	}
	if err := os.MkdirAll(filepath.Dir(o.output), 0o755); err != nil {
		return fmt.Errorf("creating the output directory: %w", err)
	}
	return imagebuild.WriteArchive(o.output, tag, img)
}

func report(img v1.Image, o options, took time.Duration) error {
	digest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("computing the image digest: %w", err)
	}
	fi, err := os.Stat(o.output)
	if err != nil {
		return fmt.Errorf("reading the archive size: %w", err)
	}
	fmt.Printf("%s: %s %s, %.1f MiB, built in %s\n", o.output, o.tag, digest, float64(fi.Size())/(1<<20), took.Round(100*time.Millisecond))
	return nil
}
