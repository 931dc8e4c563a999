package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nodelet/nodelet/test/utils"
)

// up starts the cluster and the demo, prints how to use them, waits for
// ctx (or runFor, when not zero) and stops everything.
func up(ctx context.Context, dir string, runFor time.Duration) (err error) {
	st, err := lockStateDir(dir)
	if err != nil {
		return err
	}
	defer st.unlock()
	if err := cleanUpLeftovers(st); err != nil {
		return err
	}
	assets, err := utils.EnvtestAssets(ctx)
	if err != nil {
		return err
	}
	started := time.Now()
	nodes, err := nodesCount()
	if err != nil {
		return err
	}
	c := &cluster{st: st, assets: assets, nodeName: defaultNodeName(), nodes: nodes}
	defer func() {
		step("stopping nodelet, the control plane and containerd")
		stopStart := time.Now()
		if serr := c.stop(); serr != nil {
			err = errors.Join(err, serr)
			return
		}
		fmt.Printf("    done in %s\n", time.Since(stopStart).Round(100*time.Millisecond))
	}()
	if err := c.start(ctx); err != nil {
		return err
	}
	d := &demo{c: c}
	if err := d.run(ctx); err != nil {
		return err
	}
	step("the cluster is ready (%s since start)", time.Since(started).Round(100*time.Millisecond))
	printUsage(c)
	return wait(ctx, runFor)
}

// cleanUpLeftovers removes what a run that was killed left behind.
func cleanUpLeftovers(st *stateDir) error {
	old, err := st.leftovers()
	if err != nil || old == nil {
		return err
	}
	return timed(fmt.Sprintf("cleaning up after the last run (pid %d), which did not stop", old.PID), func() error {
		if err := cleanUp(old); err != nil {
			return err
		}
		return st.forget()
	})
}

// wait returns when ctx is done or runFor (when not zero) has passed.
func wait(ctx context.Context, runFor time.Duration) error {
	if runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, runFor)
		defer cancel()
	}
	<-ctx.Done()
	return nil
}
