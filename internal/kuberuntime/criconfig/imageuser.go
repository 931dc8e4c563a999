package criconfig

import runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

// ImageUser returns the user an image runs as, from its CRI status: the
// numeric uid when the runtime reports one, else the user name. An image
// that names no user runs as root (uid 0), as does one the runtime does not
// know (img nil).
func ImageUser(img *runtimeapi.Image) (uid *int64, username string) {
	if img != nil {
		if img.Uid != nil {
			v := img.Uid.Value
			return &v, ""
		}
		if img.Username != "" {
			return nil, img.Username
		}
	}
	return new(int64), ""
}
