package cri

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrNotOwned is returned, wrapped, by every call that names a sandbox or
// container lacking nodelet's ownership label for this node. The object is
// left untouched.
var ErrNotOwned = errors.New("not owned by this nodelet")

// IsNotFound reports whether err, or an error it wraps, is a gRPC NotFound
// status from the runtime.
func IsNotFound(err error) bool {
	return grpcCode(err) == codes.NotFound
}

// grpcCode returns the gRPC code of the first error in err's chain that
// carries a status, codes.OK for nil and codes.Unknown for a plain error.
func grpcCode(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return se.GRPCStatus().Code()
	}
	return codes.Unknown
}

// IsUnimplemented reports whether err, or an error it wraps, is a gRPC
// Unimplemented status: the runtime does not offer the call.
func IsUnimplemented(err error) bool {
	return grpcCode(err) == codes.Unimplemented
}
