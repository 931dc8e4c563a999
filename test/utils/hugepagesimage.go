package utils

import (
	"context"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodelet/nodelet/test/utils/imagebuild"
)

// HugePagesImage holds test/images/hugepages, which maps huge pages of
// 2 MiB and says whether it could (`hugepages N`). It is not one of
// TestImages: import it with ImageArchive and Containerd.ImportArchive.
const HugePagesImage = "nodelet.test/hugepages:1.0"

// hugePagesProgram is the directory of the program under test/images.
const hugePagesProgram = "hugepages"

func init() {
	recipes[HugePagesImage] = imageRecipe{
		key:   func() (string, error) { return programKey(hugePagesProgram) },
		build: buildHugePages,
	}
}

func buildHugePages(ctx context.Context) (v1.Image, error) {
	bin, err := CompileProgram(ctx, hugePagesProgram)
	if err != nil {
		return nil, err
	}
	var layer imagebuild.Layer
	layer.File(hugePagesProgram, 0o755, bin)
	return imagebuild.Single(&layer, runtime.GOARCH, ImageEpoch, v1.Config{
		Entrypoint: []string{"/" + hugePagesProgram},
		Env:        []string{"PATH=/"},
	})
}
