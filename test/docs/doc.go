// Package docs holds tests that keep the documentation true to the tree:
// the layout table of docs/architecture.md names every package there is,
// and only those.
package docs
