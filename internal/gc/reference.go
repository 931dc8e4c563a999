package gc

import "strings"

// NormalizeReference spells an image reference as a container runtime
// lists it among an image's tags and digests: with a registry (docker.io
// when it names none), Docker Hub's official images under library/, and
// the tag latest when it has neither a tag nor a digest; a digest without
// the tag beside it. "busybox" is "docker.io/library/busybox:latest".
func NormalizeReference(ref string) string {
	name, digest, hasDigest := strings.Cut(ref, "@")
	first, rest, hasSlash := strings.Cut(name, "/")
	if !hasSlash || !strings.ContainsAny(first, ".:") && first != "localhost" {
		if !hasSlash {
			name = "docker.io/library/" + name
		} else {
			name = "docker.io/" + first + "/" + rest
		}
	}
	slash := strings.LastIndex(name, "/")
	repo, tag, hasTag := strings.Cut(name[slash+1:], ":")
	switch {
	case hasDigest:
		// Digests are listed without the tag.
		return name[:slash+1] + repo + "@" + digest
	case !hasTag:
		return name + ":latest"
	default:
		return name[:slash+1] + repo + ":" + tag
	}
}
