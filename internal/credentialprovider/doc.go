// Package credentialprovider gets registry credentials for an image from
// the kubelet's image credential provider plugins (KEP-2133), the exec
// plugins that nodes on EKS, GKE and AKS configure with
// --image-credential-provider-config and --image-credential-provider-bin-dir.
// New reads the config (one file, or a directory of *.json, *.yaml and *.yml
// files merged in name order) strictly as kubelet.config.k8s.io
// CredentialProviderConfig, validates it as the kubelet does and checks each
// provider's binary. Providers.Credentials runs every provider whose
// matchImages match the image, in config order: it writes a
// credentialprovider.kubelet.k8s.io CredentialProviderRequest on the
// plugin's stdin (with a service account token bound to the pod and the
// service account's annotations when the provider has tokenAttributes),
// reads the CredentialProviderResponse from its stdout, and caches it per
// image, registry or globally for the response's cacheDuration (else the
// provider's defaultCacheDuration), keyed also by the service account in
// token mode. Concurrent requests for the same image share one run. The
// returned credentials are those whose auth key matches the image, ordered
// as the kubelet's keyring orders them. A failing provider yields no
// credentials and an error naming it; errors and log lines never hold a
// password or a token. The package has no API client: the caller passes
// functions that read a ServiceAccount and request a token.
package credentialprovider
