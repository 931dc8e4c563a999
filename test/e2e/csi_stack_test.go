package e2e

import (
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/csi/hostpath"
	"github.com/nodelet/nodelet/test/utils"
)

const (
	// csiStackNode is the node id the stack's driver serves.
	csiStackNode = "e2e-csi-stack"
	// csiStackClass is the stack's StorageClass.
	csiStackClass = "e2e-csi-stack"
	// csiStackTimeout covers provisioning and binding, or attaching, or a
	// deletion, each a few controller round trips.
	csiStackTimeout = 90 * time.Second
)

// The CSI stack itself, without a node agent: the test driver, its
// registrar, external-provisioner and external-attacher against the suite's
// API server and a real kube-controller-manager (the PV binder).
var _ = Describe("CSI stack", Ordered, func() {
	var (
		stack   *utils.CSIStack
		admin   client.Client
		regDir  string
		ns      string
		pvcName = "data"
		pvName  string
		handle  string
	)

	BeforeAll(func(ctx SpecContext) {
		utils.MustStartControllerManager(ctx, apiServer, utils.ControllerManagerOptions{})
		regDir = GinkgoT().TempDir()
		stack = utils.MustStartCSIStack(ctx, apiServer, utils.CSIStackOptions{
			NodeID:          csiStackNode,
			RegistrationDir: regDir,
			StorageClass:    csiStackClass,
			AttachRequired:  true,
		})
		var err error
		admin, err = apiServer.AdminClient()
		Expect(err).NotTo(HaveOccurred())
		ns = utils.NewNamespace(ctx, admin)

		// What a node agent's registration of the driver makes: the Node
		// labelled with the driver's topology, and a CSINode with the
		// driver's node id (external-attacher reads it) and topology keys
		// (external-provisioner's topology, from which the PV's node
		// affinity comes).
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: csiStackNode, Labels: map[string]string{hostpath.TopologyKey: csiStackNode},
		}}
		Expect(admin.Create(ctx, node)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(admin.Delete(ctx, node))).To(Succeed())
		})
		csiNode := &storagev1.CSINode{
			ObjectMeta: metav1.ObjectMeta{Name: csiStackNode},
			Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{
				Name: hostpath.DefaultDriverName, NodeID: csiStackNode,
				TopologyKeys: []string{hostpath.TopologyKey},
			}}},
		}
		Expect(admin.Create(ctx, csiNode)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(admin.Delete(ctx, csiNode))).To(Succeed())
		})
	}, NodeTimeout(suiteSetupTimeout))

	It("creates the CSIDriver and the StorageClass", func(ctx SpecContext) {
		var d storagev1.CSIDriver
		Expect(admin.Get(ctx, client.ObjectKey{Name: hostpath.DefaultDriverName}, &d)).To(Succeed())
		Expect(d.Spec.AttachRequired).To(HaveValue(BeTrue()))
		Expect(d.Spec.PodInfoOnMount).To(HaveValue(BeTrue()))
		Expect(d.Spec.FSGroupPolicy).To(HaveValue(Equal(storagev1.FileFSGroupPolicy)))
		Expect(d.Spec.VolumeLifecycleModes).To(ConsistOf(storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral))
		var sc storagev1.StorageClass
		Expect(admin.Get(ctx, client.ObjectKey{Name: csiStackClass}, &sc)).To(Succeed())
		Expect(sc.Provisioner).To(Equal(hostpath.DefaultDriverName))
		Expect(sc.VolumeBindingMode).To(HaveValue(Equal(storagev1.VolumeBindingImmediate)))
		Expect(sc.ReclaimPolicy).To(HaveValue(Equal(corev1.PersistentVolumeReclaimDelete)))
	})

	It("registers the driver through the plugin registration API", func(ctx SpecContext) {
		socket := filepath.Join(regDir, hostpath.DefaultDriverName+"-reg.sock")
		Expect(socket).To(Equal(stack.RegistrationSocket))
		Expect(socket).To(BeAnExistingFile())
		conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = conn.Close() }()
		info, err := registerapi.NewRegistrationClient(conn).GetInfo(ctx, &registerapi.InfoRequest{})
		Expect(err).NotTo(HaveOccurred())
		Expect(info.GetType()).To(Equal(registerapi.CSIPlugin))
		Expect(info.GetName()).To(Equal(hostpath.DefaultDriverName))
		Expect(info.GetEndpoint()).To(Equal(stack.Endpoint))
		Expect(info.GetSupportedVersions()).To(Equal([]string{"1.0.0"}))
	})

	It("provisions a PV for a PVC that the binder binds", func(ctx SpecContext) {
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pvcName},
			Spec: corev1.PersistentVolumeClaimSpec{
				StorageClassName: ptr.To(csiStackClass),
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceStorage: resource.MustParse("16Mi"),
				}},
			},
		}
		Expect(admin.Create(ctx, pvc)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(pvc), pvc)).To(Succeed())
			g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound))
		}).WithContext(ctx).WithTimeout(csiStackTimeout).WithPolling(pollInterval).Should(Succeed())
		pvName = pvc.Spec.VolumeName
		Expect(pvName).NotTo(BeEmpty())

		var pv corev1.PersistentVolume
		Expect(admin.Get(ctx, client.ObjectKey{Name: pvName}, &pv)).To(Succeed())
		Expect(pv.Spec.CSI).NotTo(BeNil(), "a CSI PV")
		Expect(pv.Spec.CSI.Driver).To(Equal(hostpath.DefaultDriverName))
		handle = pv.Spec.CSI.VolumeHandle
		Expect(handle).NotTo(BeEmpty())
		Expect(pv.Spec.ClaimRef).NotTo(BeNil())
		Expect(pv.Spec.ClaimRef.Name).To(Equal(pvcName))
		Expect(pv.Spec.PersistentVolumeReclaimPolicy).To(Equal(corev1.PersistentVolumeReclaimDelete))
		Expect(pv.Spec.Capacity.Storage().Value()).To(Equal(int64(16 << 20)))
		Expect(pv.Status.Phase).To(Equal(corev1.VolumeBound))
		Expect(stack.VolumeDir(handle)).To(BeADirectory())
		By("pinning the PV to the node through the driver's topology")
		Expect(pv.Spec.NodeAffinity).NotTo(BeNil())
		Expect(pv.Spec.NodeAffinity.Required).NotTo(BeNil())
		Expect(pv.Spec.NodeAffinity.Required.NodeSelectorTerms).To(ConsistOf(HaveField("MatchExpressions", ConsistOf(
			corev1.NodeSelectorRequirement{Key: hostpath.TopologyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{csiStackNode}}))))

		By("passing the PVC's and PV's names to CreateVolume (--extra-create-metadata)")
		var created []utils.CallRecord
		for _, c := range stack.Calls("CreateVolume") {
			if c.Code == "OK" {
				created = append(created, c)
			}
		}
		Expect(created).NotTo(BeEmpty())
		Expect(created[len(created)-1].Parameters).To(And(
			HaveKeyWithValue("csi.storage.k8s.io/pvc/name", pvcName),
			HaveKeyWithValue("csi.storage.k8s.io/pvc/namespace", ns),
			HaveKeyWithValue("csi.storage.k8s.io/pv/name", pvName)))
	})

	It("attaches and detaches the volume through external-attacher", func(ctx SpecContext) {
		Expect(pvName).NotTo(BeEmpty(), "the provisioning spec ran")
		va := &storagev1.VolumeAttachment{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-csi-stack-" + handle},
			Spec: storagev1.VolumeAttachmentSpec{
				Attacher: hostpath.DefaultDriverName,
				NodeName: csiStackNode,
				Source:   storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(pvName)},
			},
		}
		Expect(admin.Create(ctx, va)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(va), va)).To(Succeed())
			g.Expect(va.Status.Attached).To(BeTrue())
		}).WithContext(ctx).WithTimeout(csiStackTimeout).WithPolling(pollInterval).Should(Succeed())
		Expect(va.Status.AttachmentMetadata).To(HaveKeyWithValue(hostpath.PublishContextKey, csiStackNode))
		Expect(stack.Calls("ControllerPublishVolume")).To(ContainElement(And(
			HaveField("VolumeID", handle), HaveField("NodeID", csiStackNode), HaveField("Code", "OK"))))

		Expect(admin.Delete(ctx, va)).To(Succeed())
		Eventually(func(g Gomega) {
			err := admin.Get(ctx, client.ObjectKeyFromObject(va), va)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the VolumeAttachment is gone: %v", err)
		}).WithContext(ctx).WithTimeout(csiStackTimeout).WithPolling(pollInterval).Should(Succeed())
		Expect(stack.Calls("ControllerUnpublishVolume")).To(ContainElement(And(
			HaveField("VolumeID", handle), HaveField("Code", "OK"))))
	})

	It("deletes the PV and the volume's directory with the PVC", func(ctx SpecContext) {
		Expect(pvName).NotTo(BeEmpty(), "the provisioning spec ran")
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pvcName}}
		Expect(admin.Delete(ctx, pvc)).To(Succeed())
		Eventually(func(g Gomega) {
			err := admin.Get(ctx, client.ObjectKey{Name: pvName}, &corev1.PersistentVolume{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "PV %s is gone: %v", pvName, err)
		}).WithContext(ctx).WithTimeout(csiStackTimeout).WithPolling(pollInterval).Should(Succeed())
		_, err := os.Stat(stack.VolumeDir(handle))
		Expect(os.IsNotExist(err)).To(BeTrue(), "the volume's directory is gone: %v", err)
		Expect(stack.Calls("DeleteVolume")).To(ContainElement(And(HaveField("VolumeID", handle), HaveField("Code", "OK"))))
	})
})
