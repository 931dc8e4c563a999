// Package controllers holds nodelet's reconcilers, one file each, and the
// registry that names them. main builds a manager, resolves the
// --controllers list against the registry and calls each enabled setup
// function; adding a reconciler is one file and one line in registry.go.
package controller
