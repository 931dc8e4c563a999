package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/nodelet/nodelet/test/utils"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "addons: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	archives, err := utils.AddonImages(ctx)
	if err != nil {
		return err
	}
	images := make([]string, 0, len(archives))
	for image := range archives {
		images = append(images, image)
	}
	sort.Strings(images)
	for _, image := range images {
		fmt.Printf("%s %s\n", image, archives[image])
	}
	return nil
}
