package v1alpha1

import (
	"net/http"
	"net/url"
	"path/filepath"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateStaticPods checks the static pod sources: an absolute manifest
// path, an http(s) URL, and header names HTTP allows.
func validateStaticPods(c *NodeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	if c.StaticPodPath != "" && !filepath.IsAbs(c.StaticPodPath) {
		errs = append(errs, field.Invalid(field.NewPath("staticPodPath"), c.StaticPodPath, "must be an absolute path"))
	}
	if c.StaticPodURL != "" {
		u, err := url.Parse(c.StaticPodURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, field.Invalid(field.NewPath("staticPodURL"), c.StaticPodURL, "must be an http or https URL"))
		}
	}
	if len(c.StaticPodURLHeader) > 0 && c.StaticPodURL == "" {
		errs = append(errs, field.Forbidden(field.NewPath("staticPodURLHeader"), "needs staticPodURL"))
	}
	for name := range c.StaticPodURLHeader {
		if name == "" || http.CanonicalHeaderKey(name) == "" || !validHeaderName(name) {
			errs = append(errs, field.Invalid(field.NewPath("staticPodURLHeader").Key(name), name, "must be an HTTP header name"))
		}
	}
	return errs
}

// validHeaderName reports whether name is an HTTP token (RFC 9110).
func validHeaderName(name string) bool {
	for _, r := range name {
		if r > 127 || r <= ' ' || r == 127 {
			return false
		}
		switch r {
		case '(', ')', '<', '>', '@', ',', ';', ':', '\\', '"', '/', '[', ']', '?', '=', '{', '}':
			return false
		}
	}
	return true
}
