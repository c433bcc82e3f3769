package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"sync"
	"sync/atomic"
	"time"
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
	// refusedFP is the fingerprint of what the file (and the files it
	// references) held at the last reload if that reload was refused, ""
	// otherwise. Finding it again is the same refusal, not a new one: it is
	// not recorded, counted or reported again, so that whatever fires
	// reloads (a busy directory, a resync, a SIGHUP) cannot flood History
	// or the log with one mistake. Guarded by reload.
	refusedFP string
	// refs are the files the policy file's last compile read, refused or
	// not: the ones whose changes the watcher reloads for. Guarded by
	// reload.
	refs []string
	// refsRead is poked after each reload from the file, so that a watcher
	// learns of files a SIGHUP reload started to read.
	refsRead chan struct{}
	// now is the clock of history entries; nil means time.Now.
	now func() time.Time

	hmu     sync.Mutex // guards history and kept; never held while compiling
	history []HistoryEntry
	kept    []*Compiled
}

// NewStore returns a store holding c, recorded in History as the policy
// detour started with.
func NewStore(c *Compiled) *Store {
	s := &Store{refsRead: make(chan struct{}, 1)}
	if c != nil {
		s.fileFP = c.Fingerprint
		s.refs = c.Files
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
	// it last, or when it is refused and unchanged since the last reload
	// refused it (Err is set then): nothing was swapped, counted or
	// recorded.
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
//
// A file that is refused exactly as it was at the last reload (the same
// bytes, the same referenced files) is not recorded or counted again: the
// result has Err set and Changed false, so that the caller can say it is
// still refused without saying so as a new failure.
func (s *Store) Reload(path string, compile CompileFunc) ReloadResult {
	return s.ReloadAs(TriggerSIGHUP, path, compile)
}

// ReloadAs is Reload recorded in History with trigger t.
func (s *Store) ReloadAs(t Trigger, path string, compile CompileFunc) ReloadResult {
	s.reload.Lock()
	defer s.reload.Unlock()
	defer s.pokeWatcher()
	data, err := os.ReadFile(path)
	if err != nil {
		return s.refuse(t, "read\x00"+err.Error(), "", nil, err)
	}
	// Compiled every time, not skipped when the file's bytes are unchanged:
	// a key file or ca_file it names may have been rotated.
	c, err := compile(path, data)
	if err != nil {
		fp, files := refusalOf(data, err)
		return s.refuse(t, fp, hashOf(data), files, err)
	}
	s.refusedFP = ""
	s.refs = c.Files
	cur := s.Load()
	if c.Fingerprint == s.fileFP || (cur != nil && cur.Fingerprint == c.Fingerprint) {
		s.fileFP = c.Fingerprint
		return ReloadResult{RollbackKept: cur != nil && cur.Fingerprint != c.Fingerprint}
	}
	s.fileFP = c.Fingerprint
	s.publish(c, t)
	return ReloadResult{Changed: true, Policy: c}
}

// refuse handles a reload that published nothing: fp fingerprints what was
// read, hash is the file's (for History), files what the compile read. The
// caller holds s.reload.
func (s *Store) refuse(t Trigger, fp, hash string, files []string, err error) ReloadResult {
	// Forgetting the file's fingerprint makes the next good compile
	// publish even if it equals the one before: the file did change
	// (to something broken and back), which ends a rollback.
	s.fileFP = ""
	s.refs = files
	if fp == s.refusedFP {
		return ReloadResult{Err: err}
	}
	s.refusedFP = fp
	s.refused(hash, err, t)
	return ReloadResult{Changed: true, Err: err}
}

// pokeWatcher tells a watcher that the files the policy reads may have
// changed. The channel holds one poke: a watcher that has not caught up
// rereads them once.
func (s *Store) pokeWatcher() {
	select {
	case s.refsRead <- struct{}{}:
	default:
	}
}

// readRefs returns the files the policy file's last compile read.
func (s *Store) readRefs() []string {
	s.reload.Lock()
	defer s.reload.Unlock()
	return s.refs
}

func hashOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
