package prepuller

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Annotation on a Node names the images to keep pulled on it: image
// references separated by commas ("registry.example/app:1.2, busybox").
const Annotation = "prepull.nodelet.io/images"

// InvalidImage is an entry of the annotation that is no image reference.
type InvalidImage struct {
	// Image is the entry as written (trimmed).
	Image string
	// Reason says what is wrong with it.
	Reason string
}

// ParseImages splits an annotation value into the image references it
// names, in their order, each once, trimmed of white space, and the
// entries that are no valid reference. Empty entries are skipped, so ""
// names nothing.
func ParseImages(value string) (images []string, invalid []InvalidImage) {
	seen := map[string]bool{}
	for _, entry := range strings.Split(value, ",") {
		image := strings.TrimSpace(entry)
		if image == "" || seen[image] {
			continue
		}
		seen[image] = true
		if err := validate(image); err != nil {
			invalid = append(invalid, InvalidImage{Image: image, Reason: err.Error()})
			continue
		}
		images = append(images, image)
	}
	return images, invalid
}

// validate says whether image is a reference the runtime can pull.
func validate(image string) error {
	if strings.ContainsFunc(image, func(r rune) bool { return r <= ' ' }) {
		return errors.New("invalid reference format: white space or a control character")
	}
	if _, err := name.ParseReference(image); err != nil {
		return fmt.Errorf("invalid reference format: %w", err)
	}
	return nil
}

// pullRef is the reference the runtime is asked for: image with ":latest"
// appended when it names neither a tag nor a digest, as the kubelet does.
func pullRef(image string) string {
	rest, digest, _ := strings.Cut(image, "@")
	if digest != "" {
		return image
	}
	slash := strings.LastIndex(rest, "/")
	if colon := strings.LastIndex(rest, ":"); colon > slash {
		return image
	}
	return image + ":latest"
}
