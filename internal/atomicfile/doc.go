// Package atomicfile replaces a file so that a reader, or the disk after a
// crash, holds either the old complete file or the new one, never a part
// of one: WriteFile writes to a temporary file in the same directory
// (".<name>.tmp-<random>"), gives it exactly the requested mode whatever
// the umask, fsyncs it, renames it over the file and fsyncs the directory
// so that the rename itself survives a crash. A failed write leaves the old
// file as it was and removes its temporary file; one that a crash
// interrupts can leave the temporary file behind, which IsTemp recognizes
// so that the directory's owner can remove it when it starts. WriteFunc
// does the same for content streamed by a function rather than held in
// memory. nodelet's kubeconfig, serving certificate and checkpoints are
// written with it, and so are the image archives and state files of the
// tests and tools. Projected volumes are not: they change several files
// at once and swap a symlink to a new directory instead.
package atomicfile
