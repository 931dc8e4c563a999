package containerlogs

import (
	"slices"
	"strings"
	"time"
)

const (
	// timestampFormat is the suffix of a rotated log file, the kubelet's.
	timestampFormat = "20060102-150405"
	// compressSuffix ends a compressed rotated log file.
	compressSuffix = ".gz"
	// tmpSuffix ends a file being compressed.
	tmpSuffix = ".tmp"
	// linkSuffix ends a log link's name.
	linkSuffix = ".log"
	// maxFileNameLen is the longest file name ext4 (and most Linux
	// filesystems) accept.
	maxFileNameLen = 255
)

// Plan is what one rotation of a container's log does, in order: remove
// files, compress files, then rename the current log to Rename and have the
// runtime reopen it. Names are base names in the log's directory; an empty
// Rename rotates nothing.
type Plan struct {
	// Remove lists leftovers of an interrupted rotation and the oldest
	// rotated files beyond the limit.
	Remove []string
	// Compress lists the rotated files to gzip, oldest first.
	Compress []string
	// Rename is the name the current log gets.
	Rename string
}

// PlanRotation plans the rotation of the log file logName of size bytes,
// whose directory holds names (other containers' files may be among them),
// so that at most maxFiles files of the log remain, the current one
// included, every rotated file but the newest compressed. A log smaller than
// maxSize is left alone, as is one already rotated within the same second
// (now), whose rotated name is taken. Files of the log with names nodelet
// does not make are never touched.
func PlanRotation(logName string, size int64, names []string, maxSize int64, maxFiles int, now time.Time) Plan {
	if size < maxSize {
		return Plan{}
	}
	var p Plan
	present := make(map[string]bool, len(names))
	for _, n := range names {
		present[n] = true
	}
	var rotated []string
	for _, n := range slices.Sorted(slices.Values(names)) {
		stamp, ok := strings.CutPrefix(n, logName+".")
		if !ok {
			continue
		}
		switch {
		case strings.HasSuffix(stamp, tmpSuffix) && isStamp(strings.TrimSuffix(strings.TrimSuffix(stamp, tmpSuffix), compressSuffix)):
			// A compression that did not finish.
			p.Remove = append(p.Remove, n)
		case strings.HasSuffix(stamp, compressSuffix) && isStamp(strings.TrimSuffix(stamp, compressSuffix)):
			if present[strings.TrimSuffix(n, compressSuffix)] {
				// Compressed, but the original was not removed: the
				// original is what is known to be whole.
				p.Remove = append(p.Remove, n)
				continue
			}
			rotated = append(rotated, n)
		case isStamp(stamp):
			rotated = append(rotated, n)
		}
	}
	rename := logName + "." + now.Format(timestampFormat)
	if present[rename] {
		return Plan{Remove: p.Remove}
	}
	// Oldest first: the stamps sort as the times they tell.
	slices.SortFunc(rotated, func(a, b string) int {
		return strings.Compare(strings.TrimSuffix(a, compressSuffix), strings.TrimSuffix(b, compressSuffix))
	})
	// After the rename the current log is one more rotated file, and a
	// new current one is made: keep maxFiles-2 of the rotated ones.
	keep := max(maxFiles-2, 0)
	if excess := len(rotated) - keep; excess > 0 {
		p.Remove = append(p.Remove, rotated[:excess]...)
		rotated = rotated[excess:]
	}
	for _, n := range rotated {
		if !strings.HasSuffix(n, compressSuffix) {
			p.Compress = append(p.Compress, n)
		}
	}
	p.Rename = rename
	return p
}

// isStamp reports whether s is a rotation timestamp.
func isStamp(s string) bool {
	_, err := time.Parse(timestampFormat, s)
	return err == nil
}

// IsRotatedFile reports whether name is one of the rotated files (or a
// leftover of a rotation) of the log file logName.
func IsRotatedFile(logName, name string) bool {
	stamp, ok := strings.CutPrefix(name, logName+".")
	if !ok {
		return false
	}
	stamp = strings.TrimSuffix(stamp, tmpSuffix)
	stamp = strings.TrimSuffix(stamp, compressSuffix)
	return isStamp(stamp)
}

// LinkName is the name of a container's log link, the kubelet's:
// <pod>_<namespace>_<container>-<containerID>.log, the part before .log cut
// so that the name fits a filesystem's limit of 255 bytes.
func LinkName(pod, namespace, container, containerID string) string {
	stem := pod + "_" + namespace + "_" + container + "-" + containerID
	if n := maxFileNameLen - len(linkSuffix); len(stem) > n {
		stem = stem[:n]
	}
	return stem + linkSuffix
}

// LinkState is what a sweep knows of one entry of the links directory.
type LinkState struct {
	// Name is the entry's name.
	Name string
	// PodDir is the name of the pod log directory the link points into:
	// the first component of its target's path under the pod log
	// directory; "" for an entry that is no link, or a link elsewhere.
	PodDir string
	// Owner is the node that PodDir's marker names ("" for none);
	// DirGone says that PodDir does not exist.
	Owner   string
	DirGone bool
}

// PlanLinkSweep lists, sorted, the links a sweep removes: those not in
// keep (the links of the containers the runtime holds) that point into a
// pod log directory node made (its marker names node) or into one that is
// gone, whose pod's logs are gone with it (a kubelet removes such dangling
// links too). A link into a pod log directory someone else made (a
// kubelet's, where podLogsDir is shared), a link elsewhere and anything
// that is no link are never removed.
func PlanLinkSweep(links []LinkState, keep map[string]bool, node string) []string {
	var out []string
	for _, l := range links {
		if keep[l.Name] || l.PodDir == "" {
			continue
		}
		if l.DirGone || (node != "" && l.Owner == node) {
			out = append(out, l.Name)
		}
	}
	slices.Sort(out)
	return out
}
