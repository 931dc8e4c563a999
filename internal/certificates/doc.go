// Package certificates gives nodelet its identities the way the kubelet
// gets its own: on the API server through TLS bootstrap and client
// certificate rotation, and for its own node API a serving certificate.
//
// With a bootstrap kubeconfig (--bootstrap-kubeconfig, usually a bootstrap
// token) and no usable --kubeconfig, nodelet makes a key, asks for a client
// certificate for system:node:<nodeName> in system:nodes with a
// CertificateSigningRequest to the signer
// kubernetes.io/kube-apiserver-client-kubelet, waits until the
// controller-manager approves and signs it, stores key and certificate in
// --cert-dir (nodelet-client-current.pem, mode 0600, directory 0700) and
// writes --kubeconfig pointing at them. With rotation on, a client-go
// certificate manager requests the next certificate before the current one
// expires, and the REST config nodelet runs on presents whichever is
// current at each TLS handshake; when it changes, every open connection is
// closed so that watches and requests continue on the new certificate
// without a restart. The node API's serving certificate is kept here too:
// the files the configuration names, else a self-signed pair made once for
// the node's name and address (<root>/pki/nodelet.crt and nodelet.key, mode
// 0600, directory 0700). What nodelet writes itself here, the kubeconfig
// and that pair, goes through atomicfile, so a crash never leaves half a
// file. Keys and tokens are never logged.
package certificates
