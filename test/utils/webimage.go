package utils

import (
	"context"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodelet/nodelet/test/utils/imagebuild"
)

// WebImage is a long-running HTTP server of our own (test/images/web) on
// port 8080, with no shell: an image that runs without a command, for
// `kubectl create deployment web --image=nodelet.test/web:1.0` on a local
// cluster. It is not one of TestImages; ask for it in
// ContainerdOptions.Images.
const WebImage = "nodelet.test/web:1.0"

// webProgram is the directory of the web server's source under test/images.
const webProgram = "web"

func init() {
	recipes[WebImage] = imageRecipe{
		key:   func() (string, error) { return programKey(webProgram) },
		build: buildWeb,
	}
}

func programKey(program string) (string, error) {
	src, err := ProgramSource(program)
	if err != nil {
		return "", err
	}
	return hashOf([]byte(imageFormat), []byte(program), []byte(runtime.Version()), []byte(runtime.GOARCH), src), nil
}

func buildWeb(ctx context.Context) (v1.Image, error) {
	bin, err := CompileProgram(ctx, webProgram)
	if err != nil {
		return nil, err
	}
	var layer imagebuild.Layer
	layer.Dir("tmp", 0o1777)
	layer.File(webProgram, 0o755, bin)
	return imagebuild.Single(&layer, runtime.GOARCH, ImageEpoch, v1.Config{
		Entrypoint:   []string{"/" + webProgram},
		Env:          []string{"PATH=/", "PORT=8080"},
		ExposedPorts: map[string]struct{}{"8080/tcp": {}},
	})
}
