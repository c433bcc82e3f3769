package admin

import (
	"errors"
	"sync"
)

// Readiness tracks whether detour should receive traffic: the policy is
// loaded, the CA is ready, the proxy listener is accepting, and detour is
// not shutting down. Its Check is Options.Ready. Safe for concurrent use.
type Readiness struct {
	mu                                   sync.Mutex
	policyLoaded, caReady, serving, stop bool
}

// PolicyLoaded records that a valid policy is published.
func (r *Readiness) PolicyLoaded() { r.set(&r.policyLoaded) }

// CAReady records that the CA is loaded and can sign leaf certificates.
func (r *Readiness) CAReady() { r.set(&r.caReady) }

// Serving records that the proxy listener accepts connections.
func (r *Readiness) Serving() { r.set(&r.serving) }

// ShuttingDown makes detour not ready for good. Called before draining, so
// that a Kubernetes readinessProbe takes the pod out of its Service while
// in-flight requests finish.
func (r *Readiness) ShuttingDown() { r.set(&r.stop) }

func (r *Readiness) set(b *bool) {
	r.mu.Lock()
	*b = true
	r.mu.Unlock()
}

// Check returns nil when ready, else the first reason it is not.
func (r *Readiness) Check() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.stop:
		return errors.New("shutting down: draining in-flight requests")
	case !r.policyLoaded:
		return errors.New("policy not loaded")
	case !r.caReady:
		return errors.New("CA not ready")
	case !r.serving:
		return errors.New("proxy listener not accepting yet")
	}
	return nil
}
