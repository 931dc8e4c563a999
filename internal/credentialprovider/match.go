package credentialprovider

import (
	"net"
	"net/url"
	"path/filepath"
	"strings"
)

// MatchImage reports whether image matches pattern the way the kubelet
// matches a provider's matchImages entry, and an auth key of a plugin's
// response, against an image. Both are read as schemeless URLs
// (host[:port][/path]):
//
//   - the hosts have the same number of dot-separated labels, and each
//     label of the pattern matches the image's as a filepath.Match glob, so
//     "*.azurecr.io" matches "myreg.azurecr.io" but not "a.b.azurecr.io";
//   - the ports are equal (no port matches only no port);
//   - the pattern's path is a prefix of the image's path, by characters.
//
// There is no case folding and no default registry: "nginx" is a host of one
// label. The error is the pattern's or the image's parse error, or a bad glob.
func MatchImage(pattern, image string) (bool, error) {
	p, err := parseSchemeless(pattern)
	if err != nil {
		return false, err
	}
	i, err := parseSchemeless(image)
	if err != nil {
		return false, err
	}
	pLabels, pPort := splitHost(p)
	iLabels, iPort := splitHost(i)
	if pPort != iPort || len(pLabels) != len(iLabels) || !strings.HasPrefix(i.Path, p.Path) {
		return false, nil
	}
	for n, label := range pLabels {
		ok, err := filepath.Match(label, iLabels[n])
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// parseSchemeless parses host[:port][/path] by lending it a scheme, as the
// kubelet parses matchImages entries (an entry with its own scheme then
// parses as a host named after the scheme, and never matches).
func parseSchemeless(s string) (*url.URL, error) {
	u, err := url.Parse("https://" + s)
	if err != nil {
		return nil, err
	}
	u.Scheme = ""
	return u, nil
}

// splitHost returns the labels of u's host and its port, "" if none.
func splitHost(u *url.URL) (labels []string, port string) {
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		host, port = u.Host, ""
	}
	return strings.Split(host, "."), port
}

// registryOf is the registry part of an image, host[:port], for the
// Registry cache key: everything before the first slash.
func registryOf(image string) string {
	registry, _, _ := strings.Cut(image, "/")
	return registry
}
