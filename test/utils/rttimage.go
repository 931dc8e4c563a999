package utils

import (
	"context"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodelet/nodelet/test/utils/imagebuild"
)

// RTTImage holds test/images/rtt, a TCP round-trip echo server and client
// of our own (`rtt server`, `rtt client host:port...`), with no shell. It is
// not one of TestImages; ask for it in ContainerdOptions.Images or
// ClusterOptions.Images.
const RTTImage = "nodelet.test/rtt:1.0"

// RTTProgram is the directory of the rtt program under test/images, for
// CompileProgram when it runs as a host process.
const RTTProgram = "rtt"

func init() {
	recipes[RTTImage] = imageRecipe{
		key:   func() (string, error) { return programKey(RTTProgram) },
		build: buildRTT,
	}
}

func buildRTT(ctx context.Context) (v1.Image, error) {
	bin, err := CompileProgram(ctx, RTTProgram)
	if err != nil {
		return nil, err
	}
	var layer imagebuild.Layer
	layer.File(RTTProgram, 0o755, bin)
	return imagebuild.Single(&layer, runtime.GOARCH, ImageEpoch, v1.Config{
		Entrypoint: []string{"/" + RTTProgram},
		Cmd:        []string{"server"},
		Env:        []string{"PATH=/"},
	})
}
