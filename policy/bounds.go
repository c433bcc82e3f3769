package policy

import "time"

// Defaults of the bounds on what apps may make detour hold.
const (
	// DefaultBufferedBytes is limits.buffered_bytes: 128 MiB, half the
	// 256 Mi memory limit detour's Helm chart gives the sidecar. Go's
	// garbage collector (GOGC=100) lets the heap grow to about twice what
	// was live at its last run, so the bodies get one half and the other
	// is headroom; the chain also starts a collection as bodies are given
	// back, so that wave after wave of large bodies does not pile up on
	// the garbage of the last. Four 30 MB bodies fit at once.
	DefaultBufferedBytes = 128 << 20
	// MinBufferedBytes is the smallest limits.buffered_bytes accepted: less
	// would refuse ordinary chat requests.
	MinBufferedBytes = 1 << 20
	// DefaultClientBodyTimeout is timeouts.client_body. SDKs send a body
	// in one go right after the headers; thirty seconds is room for a
	// large upload on a slow link, and no more for a client that trickles.
	DefaultClientBodyTimeout = 30 * time.Second
	// DefaultDrainTimeout is drain_timeout. Kubernetes sends SIGKILL
	// terminationGracePeriodSeconds (30 by default) after SIGTERM: set
	// that a few seconds longer than drain_timeout, so that the streams
	// cut at the end of the drain get their error events out.
	DefaultDrainTimeout = 30 * time.Second
)

// Bounds are the compiled limits on request bodies and on the drain. Every
// field is filled.
type Bounds struct {
	// BufferedBytes is the most request body bytes held at once by the
	// whole process.
	BufferedBytes int64
	// ClientBody bounds reading one request body, from the request's
	// arrival.
	ClientBody time.Duration
	// DrainTimeout is how long a stopping detour waits for requests and
	// streams before it ends them.
	DrainTimeout time.Duration
}

func (k *compiler) bounds(f *File) {
	b := Bounds{BufferedBytes: DefaultBufferedBytes, ClientBody: DefaultClientBodyTimeout, DrainTimeout: DefaultDrainTimeout}
	if f.Limits != nil {
		switch v := f.Limits.BufferedBytes; {
		case v == 0:
		case v < MinBufferedBytes:
			k.errorf("limits.buffered_bytes", "must be at least %d (1 MiB; 0 or absent: the default, %d); got %d", MinBufferedBytes, DefaultBufferedBytes, v)
		default:
			b.BufferedBytes = v
		}
	}
	if f.Timeouts != nil {
		b.ClientBody = k.duration("timeouts.client_body", f.Timeouts.ClientBody, DefaultClientBodyTimeout)
	}
	for _, name := range sortedKeys(f.Upstreams) {
		if t := f.Upstreams[name].Timeouts; t != nil && t.ClientBody != "" {
			k.errorf("upstreams."+name+".timeouts.client_body", "the request body is read once, before any upstream is chosen: set timeouts.client_body at the top level")
		}
	}
	b.DrainTimeout = k.duration("drain_timeout", f.DrainTimeout, DefaultDrainTimeout)
	k.c.Bounds = b
}
