package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/nodelet/nodelet/test/utils"
)

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "testimages:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("testimages", flag.ContinueOnError)
	out := fs.String("o", "", "directory the archives are written to (made when missing)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("-o is required")
	}
	images := fs.Args()
	if len(images) == 0 {
		images = utils.TestImages
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", *out, err)
	}
	for _, image := range images {
		src, err := utils.ImageArchive(ctx, image)
		if err != nil {
			return err
		}
		dst := filepath.Join(*out, archiveName(image))
		if err := copyFile(src, dst); err != nil {
			return fmt.Errorf("copying the archive of %s: %w", image, err)
		}
		fmt.Println(dst)
	}
	return nil
}

// archiveName is the file name of image's archive: its repository's last
// element and tag ("nodelet.test/busybox:1.35" → "busybox-1.35.tar").
func archiveName(image string) string {
	base := image[strings.LastIndex(image, "/")+1:]
	return strings.ReplaceAll(base, ":", "-") + ".tar"
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, in); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}
