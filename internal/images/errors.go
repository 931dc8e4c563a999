package images

import "errors"

// The reasons a container waits for its image, as the kubelet reports them
// in the container's Waiting state. Errors from EnsureImage wrap exactly one
// of them; Reason extracts it.
var (
	// ErrImagePull: the last pull failed.
	ErrImagePull = errors.New("ErrImagePull")
	// ErrImageNeverPull: the image is absent and the pull policy is Never.
	ErrImageNeverPull = errors.New("ErrImageNeverPull")
	// ErrInvalidImageName: the image name does not parse.
	ErrInvalidImageName = errors.New("InvalidImageName")
	// ErrImageInspect: the runtime could not tell whether the image is
	// present.
	ErrImageInspect = errors.New("ImageInspectError")
)

// ErrPullQPSExceeded is a pull refused by registryPullQPS; the container
// waits with ErrImagePull and is retried after the image pull back-off.
var ErrPullQPSExceeded = errors.New("pull QPS exceeded")

var reasons = []error{ErrImagePull, ErrImageNeverPull, ErrInvalidImageName, ErrImageInspect}

// imageError is an EnsureImage failure: a reason, the message shown to the
// user, and the underlying error, if any.
type imageError struct {
	reason  error
	message string
	cause   error
}

func (e *imageError) Error() string { return e.message }

// Unwrap exposes the reason and the cause to errors.Is and errors.As.
func (e *imageError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.reason}
	}
	return []error{e.reason, e.cause}
}

// Reason returns the Waiting reason and message for an error from
// EnsureImage: for example "ErrImageNeverPull" and
// `Container image "nginx:1.27" is not present with pull policy of Never`. For any other non-nil error it
// returns "ErrImagePull" and the error's text, and for nil two empty strings.
func Reason(err error) (reason, message string) {
	if err == nil {
		return "", ""
	}
	var ie *imageError
	if errors.As(err, &ie) {
		return ie.reason.Error(), ie.message
	}
	for _, r := range reasons {
		if errors.Is(err, r) {
			return r.Error(), err.Error()
		}
	}
	return ErrImagePull.Error(), err.Error()
}
