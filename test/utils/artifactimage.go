package utils

import (
	"context"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodelet/nodelet/test/utils/imagebuild"
)

// ArtifactImage holds files only, no program: what an image volume mounts.
// Its /data.json names "kitten.jpg" and its /etc/os-release says
// "Alpine Linux", as the files of the image Kubernetes' image volume
// specs mount (registry.k8s.io/e2e-test-images/kitten) do. It is not one
// of TestImages: push it to a registry or import it with ImageArchive.
const ArtifactImage = "nodelet.test/artifact:1.0"

// artifactFiles are ArtifactImage's files by path.
var artifactFiles = map[string]string{
	"data.json":      `{"image": "kitten.jpg", "note": "a stand-in for the kitten test image"}` + "\n",
	"etc/os-release": "NAME=\"Alpine Linux\"\nID=alpine\nPRETTY_NAME=\"a stand-in for Alpine Linux\"\n",
}

// artifactPaths orders artifactFiles.
var artifactPaths = []string{"data.json", "etc/os-release"}

func init() {
	recipes[ArtifactImage] = imageRecipe{key: artifactKey, build: buildArtifact}
}

func artifactKey() (string, error) {
	parts := [][]byte{[]byte(imageFormat), []byte(runtime.GOARCH)}
	for _, p := range artifactPaths {
		parts = append(parts, []byte(p), []byte(artifactFiles[p]))
	}
	return hashOf(parts...), nil
}

func buildArtifact(_ context.Context) (v1.Image, error) {
	var layer imagebuild.Layer
	layer.Dir("etc", 0o755)
	for _, p := range artifactPaths {
		layer.File(p, 0o644, []byte(artifactFiles[p]))
	}
	return imagebuild.Single(&layer, runtime.GOARCH, ImageEpoch, v1.Config{})
}
