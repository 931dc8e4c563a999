package utils

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// podSubnetLoadTimeout bounds the wait for containerd to load a rewritten
// CNI configuration (it watches its conf_dir).
const podSubnetLoadTimeout = 30 * time.Second

// setPodSubnet rewrites the instance's CNI configuration with subnet as
// its pod subnet, and waits until the CRI reports the new configuration
// loaded. Sandboxes made before keep their addresses.
func (c *Containerd) setPodSubnet(subnet *net.IPNet) error {
	dir := filepath.Join(c.Dir, "cni", "net.d")
	vals := map[string]string{
		"Network": c.Network,
		"Bridge":  c.Bridge,
		"Subnet":  subnet.String(),
		"IPAMDir": filepath.Join(c.Dir, "cni", "ipam"),
	}
	// Written aside and renamed: containerd never reads half a file. The
	// temporary name does not end in .conflist, so it is never loaded.
	tmp := filepath.Join(dir, ".pod-subnet.tmp")
	if err := writeTemplate(tmp, cniTemplate, vals); err != nil {
		return fmt.Errorf("writing the CNI config with pod subnet %s: %w", subnet, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "10-"+c.Network+".conflist")); err != nil {
		return fmt.Errorf("writing the CNI config with pod subnet %s: %w", subnet, err)
	}
	c.mu.Lock()
	c.Subnet = subnet
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), podSubnetLoadTimeout)
	defer cancel()
	for {
		loaded, err := c.cniConfigHas(ctx, `\"`+subnet.String()+`\"`, `"`+subnet.String()+`"`)
		if loaded {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for containerd to load pod subnet %s: %w (last: %w)", subnet, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// cniConfigHas reports whether the CNI configuration the CRI reports
// (Status verbose, "cniconfig") holds one of the strings.
func (c *Containerd) cniConfigHas(ctx context.Context, subs ...string) (bool, error) {
	callCtx, cancel := context.WithTimeout(ctx, criCallTimeout)
	defer cancel()
	rs, err := c.dialRuntime(callCtx)
	if err != nil {
		return false, err
	}
	defer rs.Close(callCtx)
	st, err := rs.Status(quietContext(callCtx), true)
	if err != nil {
		return false, err
	}
	cfg := st.GetInfo()["cniconfig"]
	for _, s := range subs {
		if strings.Contains(cfg, s) {
			return true, nil
		}
	}
	return false, fmt.Errorf("the loaded CNI config does not name the subnet yet")
}
