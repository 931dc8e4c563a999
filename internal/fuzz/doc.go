// Package fuzz holds nodelet's fuzz targets.
//
// FuzzPodPipeline runs pods built from arbitrary bytes through nodelet's
// pipeline — admission, the plan, volume set-up and mounts, the CRI configs,
// the status and the termination plan — and checks that nothing panics and
// that no container is ever given a mount source outside its pod's
// directory or a hostPath volume the pod declared.
//
// FuzzStaticManifest decodes static pod manifests (YAML or JSON, a Pod, a
// PodList or a List) as the file source does, checks that every pod it
// returns validates, is named for the node, is static and has a UID that is
// safe as a directory name, and that no error quotes a password given as
// an env value, then runs each pod through FuzzPodPipeline's checks.
//
// FuzzNodeAPI sends arbitrary requests (method, path, query, headers,
// upgrade requests, body) over a real connection to the node API's handler,
// over a runtime built with internal/nodeapi/nodeapitest as the node API's
// own tests build theirs, and checks that nothing panics, that a malformed request gets a 4xx and
// never a 5xx, that no exec, attach, port-forward or run is served without
// an allowed create on nodes/proxy nor a log without an allowed get, and
// that no log but the named pod's named container's is ever read.
//
// The package has no code of its own. `make fuzz` runs each target with
// the coverage-guided fuzzer; the unit tests run the seed corpora and, in
// TestPodPipelineMutations, TestStaticManifestMutations and
// TestNodeAPIMutations, the same checks on inputs mutated from the seeds by
// a fixed pseudo-random sequence, which needs no instrumented build.
package fuzz
