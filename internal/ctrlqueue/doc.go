// Package ctrlqueue is the work queue nodelet's controllers use: client-go's
// rate-limiting queue, with controller-runtime's workqueue metrics, whose
// unfinished-work gauges (workqueue_unfinished_work_seconds,
// workqueue_longest_running_processor_seconds) are brought up to date every
// half second while the controller processes an item, and once after the
// last one is done.
//
// The queues controller-runtime makes by default update those gauges every
// half second whether or not anything is processed: on an agent at rest,
// each of its controllers wakes the process twice a second to set two
// gauges to zero. The gauges read the same here; the agent at rest sleeps.
package ctrlqueue
