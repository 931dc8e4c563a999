package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// reqKey names requests the way the API server's metrics do: the verb
// (GET, LIST, WATCH, POST, PUT, PATCH, DELETE, DELETECOLLECTION) and the
// resource, with "/subresource" when there is one. Requests for
// non-resource paths (/metrics, /healthz, /version) have no resource.
type reqKey struct {
	verb     string
	resource string
}

func (k reqKey) String() string { return k.verb + " " + k.resource }

// apiSnapshot is what one read of the API server's /metrics says about its
// clients so far.
type apiSnapshot struct {
	at time.Time
	// requests counts finished requests (apiserver_request_total).
	requests map[reqKey]float64
	// bytes sums the bytes of their responses, watches excepted
	// (apiserver_response_sizes).
	bytes map[reqKey]float64
	// watchBytes sums the bytes of the events sent to watchers
	// (apiserver_watch_events_sizes), watchEvents counts them.
	watchBytes, watchEvents float64
	// watches is the number of open watches
	// (apiserver_longrunning_requests, verb WATCH), watchesBy the same by
	// resource.
	watches   float64
	watchesBy map[string]float64
}

// parseSample splits one line of the Prometheus text format into the
// metric's name, its labels and its value; ok is false for comments, blank
// lines and lines it cannot read.
func parseSample(line string) (name string, labels map[string]string, value float64, ok bool) {
	line = strings.TrimSpace(line)
	if line == "" || line[0] == '#' {
		return "", nil, 0, false
	}
	labels = map[string]string{}
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return "", nil, 0, false
	}
	name, tail := line[:i], line[i:]
	if tail[0] == '{' {
		tail = tail[1:]
		for {
			tail = strings.TrimLeft(tail, ", ")
			if tail == "" {
				return "", nil, 0, false
			}
			if tail[0] == '}' {
				tail = tail[1:]
				break
			}
			eq := strings.IndexByte(tail, '=')
			if eq < 0 || eq+1 >= len(tail) || tail[eq+1] != '"' {
				return "", nil, 0, false
			}
			key := tail[:eq]
			tail = tail[eq+2:]
			var val strings.Builder
			closed := false
			for i := 0; i < len(tail); i++ {
				c := tail[i]
				if c == '\\' && i+1 < len(tail) {
					i++
					switch tail[i] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(tail[i])
					}
					continue
				}
				if c == '"' {
					tail = tail[i+1:]
					closed = true
					break
				}
				val.WriteByte(c)
			}
			if !closed {
				return "", nil, 0, false
			}
			labels[key] = val.String()
		}
	}
	fields := strings.Fields(tail)
	if len(fields) == 0 {
		return "", nil, 0, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return "", nil, 0, false
	}
	return name, labels, v, true
}

// metricKey is the reqKey of a sample's verb, resource and subresource
// labels.
func metricKey(l map[string]string) reqKey {
	r := l["resource"]
	if s := l["subresource"]; s != "" && r != "" {
		r += "/" + s
	}
	return reqKey{verb: l["verb"], resource: r}
}

// parseAPISnapshot reads the samples apiSnapshot holds from the text of
// /metrics.
func parseAPISnapshot(r io.Reader, at time.Time) (apiSnapshot, error) {
	s := apiSnapshot{at: at, requests: map[reqKey]float64{}, bytes: map[reqKey]float64{}, watchesBy: map[string]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, l, v, ok := parseSample(sc.Text())
		if !ok {
			continue
		}
		switch name {
		case "apiserver_request_total":
			s.requests[metricKey(l)] += v
		case "apiserver_response_sizes_sum":
			s.bytes[metricKey(l)] += v
		case "apiserver_watch_events_sizes_sum":
			s.watchBytes += v
		case "apiserver_watch_events_total":
			s.watchEvents += v
		case "apiserver_longrunning_requests":
			if l["verb"] == "WATCH" {
				s.watches += v
				s.watchesBy[metricKey(l).resource] += v
			}
		}
	}
	if err := sc.Err(); err != nil {
		return apiSnapshot{}, fmt.Errorf("reading /metrics: %w", err)
	}
	return s, nil
}

// apiWindow is what the API server served its clients between two
// snapshots.
type apiWindow struct {
	dur                     time.Duration
	requests, bytes         map[reqKey]float64
	watchBytes, watchEvents float64
	// watches is the number of open watches at the window's end,
	// watchesBy the same by resource.
	watches   float64
	watchesBy map[string]float64
}

// between is the window from a to b. Requests without a resource (the
// reads of /metrics among them) are left out, and so are the response
// bytes of watches (apiserver_response_sizes counts a watch's whole stream
// when it ends; its events are in watchBytes already).
func between(a, b apiSnapshot) apiWindow {
	w := apiWindow{
		dur:         b.at.Sub(a.at),
		requests:    map[reqKey]float64{},
		bytes:       map[reqKey]float64{},
		watchBytes:  b.watchBytes - a.watchBytes,
		watchEvents: b.watchEvents - a.watchEvents,
		watches:     b.watches,
		watchesBy:   maps.Clone(b.watchesBy),
	}
	for k, v := range b.requests {
		if d := v - a.requests[k]; k.resource != "" && d > 0 {
			w.requests[k] = d
		}
	}
	for k, v := range b.bytes {
		// A watch's bytes are its events', counted as they are sent.
		if d := v - a.bytes[k]; k.resource != "" && k.verb != "WATCH" && d > 0 {
			w.bytes[k] = d
		}
	}
	return w
}

// minus takes out of w the API server's own traffic, base (a window
// measured with no node running, scaled to w's length, and its watches),
// and the requests the benchmark itself made in w, own. Nothing goes
// below zero.
func (w apiWindow) minus(base apiWindow, own map[reqKey]tally) apiWindow {
	scale := 0.0
	if base.dur > 0 {
		scale = float64(w.dur) / float64(base.dur)
	}
	sub := func(m map[reqKey]float64, k reqKey, v float64) {
		if m[k] -= v; m[k] <= 0 {
			delete(m, k)
		}
	}
	for k, v := range base.requests {
		sub(w.requests, k, v*scale)
	}
	for k, v := range base.bytes {
		sub(w.bytes, k, v*scale)
	}
	for k, t := range own {
		sub(w.requests, k, float64(t.count))
		sub(w.bytes, k, float64(t.bytes))
	}
	w.watchBytes = max(0, w.watchBytes-base.watchBytes*scale)
	w.watchEvents = max(0, w.watchEvents-base.watchEvents*scale)
	w.watches = max(0, w.watches-base.watches)
	w.watchesBy = maps.Clone(w.watchesBy)
	for k, v := range base.watchesBy {
		if w.watchesBy[k] -= v; w.watchesBy[k] <= 0 {
			delete(w.watchesBy, k)
		}
	}
	return w
}

// total sums the values of m.
func total(m map[reqKey]float64) float64 {
	s := 0.0
	for _, v := range m {
		s += v
	}
	return s
}

// namespaceSubresources are the subresources of a namespace, which a path
// /namespaces/<name>/<sub> names instead of a namespaced resource.
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

// requestKey classifies a request by method and URL the way the API server
// labels it in its metrics.
func requestKey(method string, u *url.URL) reqKey {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return reqKey{verb: method}
	}
	if len(parts) == 0 {
		return reqKey{verb: method}
	}
	if parts[0] == "namespaces" && len(parts) > 2 && !namespaceSubresources[parts[2]] {
		parts = parts[2:]
	}
	resource, named := parts[0], len(parts) > 1
	if len(parts) > 2 {
		resource += "/" + parts[2]
	}
	verb := method
	switch method {
	case http.MethodGet:
		switch {
		case u.Query().Get("watch") == "true" || u.Query().Get("watch") == "1":
			verb = "WATCH"
		case !named:
			verb = "LIST"
		}
	case http.MethodDelete:
		if !named {
			verb = "DELETECOLLECTION"
		}
	}
	return reqKey{verb: verb, resource: resource}
}

// tally is the requests of one key a client made and the bytes of their
// responses.
type tally struct {
	count int
	bytes int64
}

// tallyTransport counts the requests of a client and the bytes of their
// responses by reqKey, so that a benchmark can take its own requests out
// of what the API server counted.
type tallyTransport struct {
	next http.RoundTripper
	mu   sync.Mutex
	by   map[reqKey]tally
}

// tallied returns a copy of cfg whose requests t counts. Compression is
// off, so that the bytes read are the bytes the API server wrote.
func (t *tallyTransport) tallied(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.DisableCompression = true
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		t.next = rt
		return t
	})
	return cfg
}

func (t *tallyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	k := requestKey(req.Method, req.URL)
	resp, err := t.next.RoundTrip(req)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.by == nil {
		t.by = map[reqKey]tally{}
	}
	c := t.by[k]
	c.count++
	t.by[k] = c
	if err == nil && resp.Body != nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, t: t, k: k}
	}
	return resp, err
}

// take returns the tallies so far and starts again from zero.
func (t *tallyTransport) take() map[reqKey]tally {
	t.mu.Lock()
	defer t.mu.Unlock()
	by := t.by
	t.by = map[reqKey]tally{}
	return by
}

type countingBody struct {
	io.ReadCloser
	t *tallyTransport
	k reqKey
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.t.mu.Lock()
	c := b.t.by[b.k]
	c.bytes += int64(n)
	b.t.by[b.k] = c
	b.t.mu.Unlock()
	return n, err
}

// scrapeMetrics reads the API server's /metrics with hc.
func scrapeMetrics(ctx context.Context, hc *http.Client, host string) (apiSnapshot, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(host, "/")+"/metrics", http.NoBody)
	if err != nil {
		return apiSnapshot{}, err
	}
	at := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return apiSnapshot{}, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return apiSnapshot{}, fmt.Errorf("reading the API server's metrics: %s", resp.Status)
	}
	return parseAPISnapshot(resp.Body, at)
}
