package metrics

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// vec holds a family's children by label values. Finding an existing child
// hashes the values and reads the current index of children: no lock and
// no allocation (every request looks up half a dozen children, and a read
// lock was two atomic writes each). A child, once made, lives as long as
// the family (detour's label values are bounded by the policy and the
// class list), so a caller may keep it and skip the lookup altogether.
type vec[M any] struct {
	desc     *Desc
	newChild func() *M

	// mu orders the making of children. children is never changed once
	// published: a new child publishes a new index with it (children are
	// made a few times over a process's life, looked up on every request).
	mu       sync.Mutex
	children atomic.Pointer[childIndex[M]]
}

// childIndex is the children by the hash of their values.
type childIndex[M any] struct {
	byHash map[uint64][]*child[M]
}

type child[M any] struct {
	values []string
	m      *M
}

// newVec returns a family with no children yet (a nil index).
func newVec[M any](d *Desc, newChild func() *M) vec[M] {
	return vec[M]{desc: d, newChild: newChild}
}

// Desc describes the family.
func (v *vec[M]) Desc() *Desc { return v.desc }

// WithLabelValues returns the child for values, given in the order of the
// family's label names, making it on first use. It panics when the number
// of values is not the number of label names.
func (v *vec[M]) WithLabelValues(values ...string) *M {
	if len(values) != len(v.desc.labels) {
		panic("metrics: " + v.desc.name + " takes " + strings.Join(v.desc.labels, ",") + "; got " + strings.Join(values, ","))
	}
	h := hashValues(values)
	if m := v.children.Load().find(h, values); m != nil {
		return m
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	idx := v.children.Load()
	if m := idx.find(h, values); m != nil {
		return m
	}
	if idx == nil {
		idx = &childIndex[M]{}
	}
	c := &child[M]{values: make([]string, len(values)), m: v.newChild()}
	for i, s := range values {
		// A copy: the caller's string may share memory with something
		// much larger (a request's body, a log line) that the family would
		// otherwise keep alive.
		c.values[i] = strings.Clone(s)
	}
	next := &childIndex[M]{byHash: make(map[uint64][]*child[M], len(idx.byHash)+1)}
	for k, cs := range idx.byHash {
		next.byHash[k] = cs
	}
	// A new slice for the hash: the published one may be read meanwhile.
	next.byHash[h] = append(slices.Clip(idx.byHash[h]), c)
	v.children.Store(next)
	return c.m
}

func (idx *childIndex[M]) find(h uint64, values []string) *M {
	if idx == nil {
		return nil
	}
	for _, c := range idx.byHash[h] {
		if slices.Equal(c.values, values) {
			return c.m
		}
	}
	return nil
}

// each calls f for every child.
func (v *vec[M]) each(f func(values []string, m *M)) {
	idx := v.children.Load()
	if idx == nil {
		return
	}
	for _, cs := range idx.byHash {
		for _, c := range cs {
			f(c.values, c.m)
		}
	}
}

// hashValues is FNV-1a over the values, each followed by a byte that no
// UTF-8 text contains, so that ("ab", "c") and ("a", "bc") differ.
func hashValues(values []string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for _, s := range values {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= prime
		}
		h ^= 0xff
		h *= prime
	}
	return h
}
