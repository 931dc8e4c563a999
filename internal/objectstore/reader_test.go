package objectstore_test

import (
	"github.com/nodelet/nodelet/internal/executor"
	"github.com/nodelet/nodelet/internal/objectstore"
)

// The store plugs into the executor as it is; the volume manager's Fetcher
// takes the same two methods plus service account tokens.
var _ executor.ObjectReader = objectstore.Reader{}
