package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Store publishes the current compiled policy. Readers call Load once per
// request and use that value throughout, so a reload never changes a
// request's chain halfway.
//
// The store also remembers the last HistorySize load attempts and the last
// KeptPolicies policies it published, so that an operator can see what
// changed and roll back (history.go).
type Store struct {
	cur      atomic.Pointer[Compiled]
	ok, fail atomic.Uint64
	// reload serialises reloads and rollbacks: two overlapping compiles
	// could otherwise publish an older file after a newer one.
	reload sync.Mutex
	// fileFP is the fingerprint of what the policy file (and the files it
	// references) compiled to at the last reload, "" after a refused one.
	// A reload that finds the same fingerprint changes nothing, which is
	// what keeps a rollback in effect until the file really changes.
	// Guarded by reload.
	fileFP string
	// now is the clock of history entries; nil means time.Now.
	now func() time.Time

	hmu     sync.Mutex // guards history and kept; never held while compiling
	history []HistoryEntry
	kept    []*Compiled
}

// NewStore returns a store holding c, recorded in History as the policy
// detour started with.
func NewStore(c *Compiled) *Store {
	s := &Store{}
	if c != nil {
		s.fileFP = c.Fingerprint
		s.publish(c, TriggerStart)
	}
	return s
}

// Load returns the current policy.
func (s *Store) Load() *Compiled { return s.cur.Load() }

// Swap publishes c as is: it is not recorded in History, not kept for
// Rollback and not counted. Reload and Rollback are the operator's ways in.
func (s *Store) Swap(c *Compiled) { s.cur.Store(c) }

// Reloads returns how many reloads (rollbacks included) succeeded and how
// many were refused since start.
func (s *Store) Reloads() (ok, failed uint64) { return s.ok.Load(), s.fail.Load() }

// ReloadResult describes one reload attempt, for the caller's log.
type ReloadResult struct {
	// Changed is false when the file compiled to what was published from
	// it last (nothing was swapped, counted or recorded).
	Changed bool
	// Policy is the newly published policy on success.
	Policy *Compiled
	// Err is why the file was refused; the previous policy stays.
	Err error
	// RollbackKept is set on an unchanged result while a rollback is in
	// effect: the file still holds what it held before the rollback, so the
	// rolled-back policy stays.
	RollbackKept bool
}

// CompileFunc compiles a policy file's bytes.
type CompileFunc func(name string, data []byte) (*Compiled, error)

// Reload reads path, and publishes its policy if it compiles and differs
// from the policy last published from the file. It is recorded in History
// as a SIGHUP reload; the watcher records its own as TriggerWatch.
func (s *Store) Reload(path string, compile CompileFunc) ReloadResult {
	return s.ReloadAs(TriggerSIGHUP, path, compile)
}

// ReloadAs is Reload recorded in History with trigger t.
func (s *Store) ReloadAs(t Trigger, path string, compile CompileFunc) ReloadResult {
	s.reload.Lock()
	defer s.reload.Unlock()
	data, err := os.ReadFile(path)
	if err != nil {
		s.fileFP = ""
		s.refused("", err, t)
		return ReloadResult{Changed: true, Err: err}
	}
	// Compiled every time, not skipped when the file's bytes are unchanged:
	// a key file or ca_file it names may have been rotated.
	c, err := compile(path, data)
	if err != nil {
		// Forgetting the file's fingerprint makes the next good compile
		// publish even if it equals the one before: the file did change
		// (to something broken and back), which ends a rollback.
		s.fileFP = ""
		s.refused(hashOf(data), err, t)
		return ReloadResult{Changed: true, Err: err}
	}
	cur := s.Load()
	if c.Fingerprint == s.fileFP || (cur != nil && cur.Fingerprint == c.Fingerprint) {
		s.fileFP = c.Fingerprint
		return ReloadResult{RollbackKept: cur != nil && cur.Fingerprint != c.Fingerprint}
	}
	s.fileFP = c.Fingerprint
	s.publish(c, t)
	return ReloadResult{Changed: true, Policy: c}
}

// DefaultDebounce is how long the watcher waits after the last file event
// before reloading: editors write a file in several steps, and the kubelet
// swaps a ConfigMap with several renames.
const DefaultDebounce = 100 * time.Millisecond

// Watch reloads path whenever it changes, until ctx ends. It watches the
// file's directory, not the file: editors replace files by rename, and
// Kubernetes updates a ConfigMap volume by swapping the "..data" symlink,
// neither of which a watch on the old inode would see. Each attempt that
// changed something is reported to onResult.
func (s *Store) Watch(ctx context.Context, path string, compile CompileFunc, debounce time.Duration, onResult func(ReloadResult)) error {
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Add(filepath.Dir(abs)); err != nil {
		return err
	}
	// Also watch the directories of the files the policy references (a key
	// in a Kubernetes Secret volume, a ca_file), so that rotating one
	// reloads. A directory that cannot be watched only loses that.
	watched := map[string]bool{filepath.Dir(abs): true}
	watchRefs := func(c *Compiled) {
		if c == nil {
			return
		}
		for _, f := range c.Files {
			d := filepath.Dir(f)
			if !watched[d] && w.Add(d) == nil {
				watched[d] = true
			}
		}
	}
	watchRefs(s.Load())
	added := make(chan *Compiled, 1)
	var (
		mu    sync.Mutex
		timer *time.Timer
	)
	fire := func() {
		r := s.ReloadAs(TriggerWatch, abs, compile)
		if r.Changed && onResult != nil {
			onResult(r)
		}
		if r.Policy != nil {
			select {
			case added <- r.Policy:
			default:
			}
		}
	}
	defer func() {
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case c := <-added:
			watchRefs(c)
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("policy watcher closed")
			}
			if ev.Op == fsnotify.Chmod {
				continue
			}
			// Any change in the directory may be the one that matters: the
			// file itself, a symlink it resolves through, or "..data".
			// Reload compares hashes, so spurious events cost one read.
			mu.Lock()
			if timer == nil {
				timer = time.AfterFunc(debounce, fire)
			} else {
				timer.Reset(debounce)
			}
			mu.Unlock()
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("policy watcher closed")
			}
			if onResult != nil {
				onResult(ReloadResult{Changed: true, Err: err})
			}
		}
	}
}

func hashOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
