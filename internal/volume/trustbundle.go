package volume

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"io/fs"
	"slices"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// trustBundlePayload projects a clusterTrustBundle source, as the kubelet
// does: the bundle named, or the trust anchors of every bundle of the
// signer that the label selector matches (none when it is unset, all when
// it is empty), deduplicated and in a stable order, into one PEM file at
// the source's path. A bundle that does not exist, or a selection that
// matches none, fails the volume unless the source is optional, which
// then writes no file.
func (m *Manager) trustBundlePayload(ctx context.Context, s *v1.ClusterTrustBundleProjection, defaultMode fs.FileMode) (payload, error) {
	optional := s.Optional != nil && *s.Optional
	var pemData []byte
	switch {
	case s.Name != nil:
		b, err := m.fetcher.ClusterTrustBundle(ctx, *s.Name)
		if apierrors.IsNotFound(err) && optional {
			return payload{}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("getting clustertrustbundle %q: %w", *s.Name, err)
		}
		pemData = []byte(b.Spec.TrustBundle)
	case s.SignerName != nil:
		bundles, err := m.fetcher.ClusterTrustBundles(ctx, *s.SignerName)
		if err != nil {
			return nil, fmt.Errorf("listing clustertrustbundles of signer %q: %w", *s.SignerName, err)
		}
		selected, err := selectBundles(bundles, s.LabelSelector)
		if err != nil {
			return nil, err
		}
		if len(selected) == 0 {
			if optional {
				return payload{}, nil
			}
			return nil, fmt.Errorf("combination of signerName %q and labelSelector matched zero ClusterTrustBundles", *s.SignerName)
		}
		if pemData, err = mergeTrustAnchors(selected); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("clusterTrustBundle source names neither a bundle nor a signer")
	}
	return payload{s.Path: {data: pemData, mode: defaultMode}}, nil
}

// selectBundles returns the bundles selector matches: none for a nil
// selector, all for an empty one.
func selectBundles(bundles []certificatesv1.ClusterTrustBundle, selector *metav1.LabelSelector) ([]certificatesv1.ClusterTrustBundle, error) {
	if selector == nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil, fmt.Errorf("parsing the clusterTrustBundle label selector: %w", err)
	}
	var out []certificatesv1.ClusterTrustBundle
	for _, b := range bundles {
		if sel.Matches(labels.Set(b.Labels)) {
			out = append(out, b)
		}
	}
	return out, nil
}

// mergeTrustAnchors returns the certificates of bundles as one PEM
// document, each once, ordered by their encoding so that the file only
// changes when the set does.
func mergeTrustAnchors(bundles []certificatesv1.ClusterTrustBundle) ([]byte, error) {
	var blocks [][]byte
	for _, b := range bundles {
		rest := []byte(b.Spec.TrustBundle)
		for {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			if block.Type != "CERTIFICATE" {
				return nil, fmt.Errorf("clustertrustbundle %q holds a %s block, not only certificates", b.Name, block.Type)
			}
			blocks = append(blocks, pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: block.Bytes}))
		}
	}
	slices.SortFunc(blocks, bytes.Compare)
	blocks = slices.CompactFunc(blocks, bytes.Equal)
	return bytes.Join(blocks, nil), nil
}
