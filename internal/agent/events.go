package agent

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
)

const (
	// eventSeriesPerPod is how many Event series (an object, a reason, a
	// message) of each pod the node may run the correlator remembers:
	// more than a pod makes in its life but for its repeated failures,
	// which repeat one series.
	eventSeriesPerPod = 8
	// minEventCacheEntries bounds the correlator's caches from below for
	// a node of few pods.
	minEventCacheEntries = 256
)

// eventCacheEntries is the size of each of the Event correlator's caches
// (the aggregation of similar Events, the count of repeated ones, the spam
// filter's per-object rate) on a node of maxPods pods.
//
// client-go's default, 4096, is never reached by one node's live pods but
// fills with those of pods long gone: a node whose pods come and go (a
// CronJob's) holds 5.5 MiB of them once it has seen about 4000 pods. A
// series dropped from the cache costs at most a new Event where a count
// would have gone up.
func eventCacheEntries(maxPods int32) int {
	return max(int(maxPods)*eventSeriesPerPod, minEventCacheEntries)
}

// eventSink is the broadcaster that sends a node's Events to the API
// server, made at the first recorder asked for and shut down once the
// manager stops. A recorder asked for later records nothing.
type eventSink struct {
	entries int
	mu      sync.Mutex
	b       record.EventBroadcaster
}

// broadcaster returns the sink's broadcaster, making it over mgr's clients
// the first time.
func (s *eventSink) broadcaster(mgr ctrl.Manager) record.EventBroadcaster {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b != nil {
		return s.b
	}
	s.b = record.NewBroadcaster(record.WithCorrelatorOptions(record.CorrelatorOptions{LRUCacheSize: s.entries}))
	// Without a client (a configuration the manager took but this client
	// refuses) the Events are still logged.
	cs, err := corev1client.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		mgr.GetLogger().Error(err, "Unable to make the Events' client; Events are only logged")
	} else {
		s.b.StartRecordingToSink(&corev1client.EventSinkImpl{Interface: cs.Events("")})
	}
	log := mgr.GetLogger().WithName("events")
	s.b.StartEventWatcher(func(e *corev1.Event) {
		log.V(1).Info(e.Message, "type", e.Type, "object", e.InvolvedObject, "reason", e.Reason)
	})
	return s.b
}

// shutdown stops the broadcaster, if one was made.
func (s *eventSink) shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b != nil {
		s.b.Shutdown()
	}
}
