// Package statstest builds a stats.Provider over the CRI fake, a host of
// fixed files and a fake client, with pods of this node and of another, for
// the tests of the summary and of the node API endpoints that serve it; only
// tests import it.
package statstest
