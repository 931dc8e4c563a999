// Package certificates gives nodelet its identities the way the kubelet
// gets its own: on the API server through TLS bootstrap and client
// certificate rotation, and for its own node API a serving certificate.
//
// With a bootstrap kubeconfig (--bootstrap-kubeconfig, usually a bootstrap
// token) and no usable --kubeconfig, nodelet makes a key, asks for a client
// certificate for system:node:<nodeName> in system:nodes with a
// CertificateSigningRequest to the signer
// kubernetes.io/kube-apiserver-client-kubelet, waits until it is approved
// (by nodelet's approver, internal/approver, for the node the bootstrap
// token is bound to only) and signed by the controller-manager, then
// removes the bootstrap kubeconfig, stores key and certificate in
// --cert-dir (nodelet-client-current.pem, mode 0600, directory 0700) and
// writes --kubeconfig pointing at them. With rotation on, a client-go
// certificate manager requests the next certificate before the current one
// expires, and the REST config nodelet runs on presents whichever is
// current at each TLS handshake; when it changes, every open connection is
// closed so that watches and requests continue on the new certificate
// without a restart. The node API's serving certificate is kept here too
// (Serving), and served through tls.Config.GetCertificate so that a new
// one is used at the next handshake without a restart: the files the
// configuration names (server.tlsCertFile and tlsPrivateKeyFile), read
// again when their content changes; else a self-signed pair for the
// node's name and addresses (<root>/pki/nodelet.crt and nodelet.key, mode
// 0600, directory 0700), made again at start and while running when it is
// expired, within a fifth of its lifetime (at most 30 days) of its expiry,
// or not for one of the addresses the Node reports; else, with
// serverTLSBootstrap, a certificate the cluster issues to a CSR to the
// signer kubernetes.io/kubelet-serving, made with the node's client
// credentials by a client-go certificate manager that renews it before it
// expires (<root>/pki/kubelet-server-current.pem); until one is issued,
// handshakes fail, as the kubelet's do. The client CA bundle
// (server.clientCAFile) is read again when it changes too (ClientCAs). A
// changed file that does not load is logged and the last good content
// kept. Files are checked every ReloadPeriod (15 s): reading a few small
// files that often costs nothing worth saving. What nodelet writes itself
// here, the kubeconfig and the self-signed pair, goes through atomicfile,
// so a crash never leaves half a file. A directory nodelet makes for keys
// is 0700; one that exists keeps its mode, and is refused when its group
// or others may write to it. Keys and tokens are never logged.
package certificates
