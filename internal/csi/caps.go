package csi

import (
	"context"
	"sync"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
)

// capabilitySource is a Drivers that remembers its drivers' node
// capabilities (the Registry does).
type capabilitySource interface {
	NodeCapabilities(ctx context.Context, driver string) (*csipb.NodeGetCapabilitiesResponse, error)
}

// nodeGetCapabilities returns the node capabilities of driver, whose node
// service is client: from drivers when it remembers them, otherwise asked
// of the driver. The answer is shared: callers must not change it.
func nodeGetCapabilities(ctx context.Context, drivers Drivers, client csipb.NodeClient, driver string) (*csipb.NodeGetCapabilitiesResponse, error) {
	if s, ok := drivers.(capabilitySource); ok {
		return s.NodeCapabilities(ctx, driver)
	}
	return client.NodeGetCapabilities(ctx, &csipb.NodeGetCapabilitiesRequest{})
}

// NodeCapabilities returns the named driver's NodeGetCapabilities answer,
// asked once per registration: a driver's capabilities do not change while
// it runs, and a driver that restarts registers again, which forgets them.
// Errors are not remembered. The answer is shared: callers must not change
// it.
func (r *Registry) NodeCapabilities(ctx context.Context, driver string) (*csipb.NodeGetCapabilitiesResponse, error) {
	resp, gen, ok := r.caps.lookup(driver)
	if ok {
		return resp, nil
	}
	c, err := r.NodeClient(ctx, driver)
	if err != nil {
		return nil, err
	}
	resp, err = c.NodeGetCapabilities(ctx, &csipb.NodeGetCapabilitiesRequest{})
	if err != nil {
		return nil, err
	}
	r.caps.store(driver, gen, resp)
	return resp, nil
}

// capsCache holds drivers' NodeGetCapabilities answers by driver name. Its
// zero value is empty and ready for use.
type capsCache struct {
	mu      sync.Mutex
	answers map[string]*csipb.NodeGetCapabilitiesResponse
	// generations count each driver's forgets, so that an answer asked
	// before the driver registered again is not stored after it.
	generations map[string]uint64
}

// lookup returns the driver's remembered answer, or the generation to
// store a fresh answer under.
func (c *capsCache) lookup(driver string) (*csipb.NodeGetCapabilitiesResponse, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	resp, ok := c.answers[driver]
	return resp, c.generations[driver], ok
}

// store remembers resp for driver unless the driver was forgotten since
// lookup returned gen.
func (c *capsCache) store(driver string, gen uint64, resp *csipb.NodeGetCapabilitiesResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.generations[driver] != gen {
		return
	}
	if c.answers == nil {
		c.answers = map[string]*csipb.NodeGetCapabilitiesResponse{}
	}
	c.answers[driver] = resp
}

// forget drops the driver's answer: it registered again or went away.
func (c *capsCache) forget(driver string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.answers, driver)
	if c.generations == nil {
		c.generations = map[string]uint64{}
	}
	c.generations[driver]++
}

// forgetAll drops every answer.
func (c *capsCache) forgetAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for driver := range c.answers {
		if c.generations == nil {
			c.generations = map[string]uint64{}
		}
		c.generations[driver]++
	}
	c.answers = nil
}
