// Command nnp prints its effective user ID. Installed set-user-ID root in
// the conformance suite's nonewprivs image, it shows whether a container
// may gain privileges (allowPrivilegeEscalation): 0 when it may, the
// caller's uid when no_new_privs holds.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Printf("Effective uid: %d\n", os.Geteuid())
}
