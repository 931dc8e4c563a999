// Command plugin is a credential provider plugin for the package's tests.
// It speaks the protocol with the standard library only, and its behaviour
// comes from its environment:
//
//	PLUGIN_COUNT_FILE     a byte is appended to it on every run
//	PLUGIN_REQUEST_FILE   the request read on stdin is written to it
//	PLUGIN_ARGS_FILE      the arguments, one a line, are written to it
//	PLUGIN_GATE_FILE      the plugin waits for it to exist before it answers
//	PLUGIN_MODE           ok (default), fail, hang, badjson, wrongversion,
//	                      extrafield, echotoken
//	PLUGIN_API_VERSION    the response's apiVersion (default: the request's)
//	PLUGIN_CACHE_KEY_TYPE the response's cacheKeyType (default Image)
//	PLUGIN_CACHE_DURATION the response's cacheDuration, absent when unset
//	PLUGIN_AUTH_KEYS      comma-separated auth keys (default: the image's
//	                      registry)
//	PLUGIN_PASSWORD       the password of every entry (default
//	                      "secret-password")
//	PLUGIN_USERNAME       the username of every entry (default: the image
//	                      the request named)
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

type request struct {
	APIVersion                string            `json:"apiVersion"`
	Kind                      string            `json:"kind"`
	Image                     string            `json:"image"`
	ServiceAccountToken       string            `json:"serviceAccountToken,omitempty"`
	ServiceAccountAnnotations map[string]string `json:"serviceAccountAnnotations,omitempty"`
}

type authConfig struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

type response struct {
	APIVersion    string                `json:"apiVersion"`
	Kind          string                `json:"kind"`
	CacheKeyType  string                `json:"cacheKeyType"`
	CacheDuration string                `json:"cacheDuration,omitempty"`
	Auth          map[string]authConfig `json:"auth,omitempty"`
	Extra         string                `json:"extra,omitempty"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	if f := os.Getenv("PLUGIN_COUNT_FILE"); f != "" {
		if err := appendByte(f); err != nil {
			return err
		}
	}
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	if f := os.Getenv("PLUGIN_REQUEST_FILE"); f != "" {
		if err := os.WriteFile(f, data, 0o600); err != nil {
			return err
		}
	}
	if f := os.Getenv("PLUGIN_ARGS_FILE"); f != "" {
		if err := os.WriteFile(f, []byte(strings.Join(os.Args[1:], "\n")), 0o600); err != nil {
			return err
		}
	}
	var req request
	if err := json.Unmarshal(data, &req); err != nil {
		return fmt.Errorf("reading the request: %w", err)
	}
	if gate := os.Getenv("PLUGIN_GATE_FILE"); gate != "" {
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(gate); err == nil {
				break
			}
		}
	}
	resp := response{
		APIVersion:    req.APIVersion,
		Kind:          "CredentialProviderResponse",
		CacheKeyType:  envOr("PLUGIN_CACHE_KEY_TYPE", "Image"),
		CacheDuration: os.Getenv("PLUGIN_CACHE_DURATION"),
		Auth:          map[string]authConfig{},
	}
	password := envOr("PLUGIN_PASSWORD", "secret-password")
	switch os.Getenv("PLUGIN_MODE") {
	case "fail":
		return fmt.Errorf("the registry refused image %s", req.Image)
	case "hang":
		time.Sleep(time.Hour)
	case "badjson":
		fmt.Printf(`{"apiVersion":%q,"kind":"CredentialProviderResponse","auth":{"x":{"password":%q`, req.APIVersion, password)
		return nil
	case "wrongversion":
		resp.APIVersion = "credentialprovider.kubelet.k8s.io/v1alpha1"
	case "extrafield":
		resp.Extra = password
	case "echotoken":
		password = req.ServiceAccountToken
	}
	if v := os.Getenv("PLUGIN_API_VERSION"); v != "" {
		resp.APIVersion = v
	}
	registry, _, _ := strings.Cut(req.Image, "/")
	for _, k := range strings.Split(envOr("PLUGIN_AUTH_KEYS", registry), ",") {
		resp.Auth[k] = authConfig{Username: envOr("PLUGIN_USERNAME", req.Image), Password: password}
	}
	return json.NewEncoder(os.Stdout).Encode(resp)
}

func appendByte(path string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write([]byte{'x'}); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
