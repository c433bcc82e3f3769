package metrics

import (
	"slices"
	"strings"
	"sync"
)

// vec holds a family's children by label values. Finding an existing child
// hashes the values and takes a read lock: no allocation. A child, once
// made, lives as long as the family (detour's label values are bounded by
// the policy and the class list), so a caller may keep it and skip the
// lookup altogether.
type vec[M any] struct {
	desc     *Desc
	newChild func() *M

	mu       sync.RWMutex
	children map[uint64][]*child[M]
	n        int
}

type child[M any] struct {
	values []string
	m      *M
}

func newVec[M any](d *Desc, newChild func() *M) vec[M] {
	return vec[M]{desc: d, newChild: newChild, children: map[uint64][]*child[M]{}}
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
	v.mu.RLock()
	m := v.find(h, values)
	v.mu.RUnlock()
	if m != nil {
		return m
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if m := v.find(h, values); m != nil {
		return m
	}
	c := &child[M]{values: make([]string, len(values)), m: v.newChild()}
	for i, s := range values {
		// A copy: the caller's string may share memory with something
		// much larger (a request's body, a log line) that the family would
		// otherwise keep alive.
		c.values[i] = strings.Clone(s)
	}
	v.children[h] = append(v.children[h], c)
	v.n++
	return c.m
}

func (v *vec[M]) find(h uint64, values []string) *M {
	for _, c := range v.children[h] {
		if slices.Equal(c.values, values) {
			return c.m
		}
	}
	return nil
}

// each calls f for every child, outside the lock.
func (v *vec[M]) each(f func(values []string, m *M)) {
	v.mu.RLock()
	all := make([]*child[M], 0, v.n)
	for _, cs := range v.children {
		all = append(all, cs...)
	}
	v.mu.RUnlock()
	for _, c := range all {
		f(c.values, c.m)
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
