package admission

// The kubelet's rejection of a pod while the node shuts down.
const (
	ReasonNodeShutdown  = "NodeShutdown"
	MessageNodeShutdown = "Pod was rejected as the node is shutting down."
)

// AdmitShuttingDown decides, as the kubelet's node shutdown manager does,
// whether a pod may start: none, critical or static ones included, while
// the node shuts down.
func AdmitShuttingDown(shuttingDown bool) Result {
	if shuttingDown {
		return Result{Reason: ReasonNodeShutdown, Message: MessageNodeShutdown}
	}
	return Result{Admit: true}
}
