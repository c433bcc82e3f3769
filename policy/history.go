package policy

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Trigger says what started a policy load attempt.
type Trigger string

// The triggers of a load attempt.
const (
	TriggerStart    Trigger = "start"    // the policy detour started with
	TriggerWatch    Trigger = "watch"    // the file watcher saw a change
	TriggerSIGHUP   Trigger = "sighup"   // an operator sent SIGHUP
	TriggerRollback Trigger = "rollback" // an operator rolled back (POST /policy/rollback)
)

// Results of a load attempt.
const (
	ResultOK      = "ok"      // compiled and published
	ResultRefused = "refused" // unreadable or invalid; the previous policy stayed
)

// Bounds of what the store remembers. Both are small: history is for an
// operator's eyes, and every kept policy holds its compiled upstreams
// (keys included) in memory.
const (
	// HistorySize is how many load attempts History returns.
	HistorySize = 20
	// KeptPolicies is how many distinct successfully compiled policies are
	// kept for Rollback.
	KeptPolicies = 10
	// MinHashPrefix is the shortest hash prefix Rollback accepts.
	MinHashPrefix = 8
)

// HistoryEntry is one load attempt.
type HistoryEntry struct {
	// Version and Hash identify the policy. For a refused attempt Version
	// is empty and Hash is the SHA-256 of the refused file's bytes (empty
	// when it could not be read).
	Version string
	Hash    string
	// At is when the attempt finished (for TriggerStart: when the policy
	// was compiled).
	At      time.Time
	Result  string
	Err     string
	Trigger Trigger
	// Active marks the attempt that published the policy in effect now:
	// the newest ok entry with its fingerprint.
	Active bool

	// fingerprint, not the *Compiled: history must not keep more compiled
	// policies (and their keys) alive than KeptPolicies.
	fingerprint string
}

// The errors of Rollback, for the admin handler's status codes.
var (
	// ErrBadHash: the hash is not hex or is shorter than MinHashPrefix.
	ErrBadHash = errors.New("hash must be at least 8 hex digits")
	// ErrUnknownPolicy: no kept policy has that hash.
	ErrUnknownPolicy = errors.New("no kept policy has that hash")
	// ErrAmbiguousHash: the prefix matches policies with different hashes.
	ErrAmbiguousHash = errors.New("hash prefix matches more than one policy")
)

// History returns the last HistorySize load attempts, newest first.
func (s *Store) History() []HistoryEntry {
	cur := s.Load()
	s.hmu.Lock()
	defer s.hmu.Unlock()
	out := make([]HistoryEntry, 0, len(s.history))
	active := false
	for i := len(s.history) - 1; i >= 0; i-- {
		e := s.history[i]
		if !active && cur != nil && e.Result == ResultOK && e.fingerprint == cur.Fingerprint {
			e.Active, active = true, true
		}
		out = append(out, e)
	}
	return out
}

// Kept returns the policies Rollback can publish, newest first.
func (s *Store) Kept() []*Compiled {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	out := make([]*Compiled, 0, len(s.kept))
	for i := len(s.kept) - 1; i >= 0; i-- {
		out = append(out, s.kept[i])
	}
	return out
}

// Rollback publishes the kept policy whose Hash is hash or starts with it
// (at least MinHashPrefix hex digits). When several kept policies share the
// hash (the same file compiled with a rotated key), the newest is published.
//
// A rollback stays in effect until the policy file, or a file it references
// (auth.file, ca_file), changes: watcher events and SIGHUPs that find the
// file as it was do not undo it, and the next successful reload of a changed
// file replaces it. A rollback is counted as an ok reload and recorded in
// History with TriggerRollback.
func (s *Store) Rollback(hash string) (*Compiled, error) {
	hash = strings.ToLower(strings.TrimSpace(hash))
	if len(hash) < MinHashPrefix || strings.Trim(hash, "0123456789abcdef") != "" {
		return nil, ErrBadHash
	}
	s.reload.Lock()
	defer s.reload.Unlock()
	var found *Compiled
	for _, c := range s.Kept() {
		if !strings.HasPrefix(c.Hash, hash) {
			continue
		}
		if found == nil {
			found = c
		} else if found.Hash != c.Hash {
			return nil, fmt.Errorf("%w: %s… and %s…", ErrAmbiguousHash, found.Hash[:12], c.Hash[:12])
		}
	}
	if found == nil {
		return nil, ErrUnknownPolicy
	}
	s.publish(found, TriggerRollback)
	return found, nil
}

// publish makes c current and records it. The caller holds s.reload
// (NewStore excepted: nothing else can see the store yet).
func (s *Store) publish(c *Compiled, t Trigger) {
	s.cur.Store(c)
	at := s.clock()
	if t == TriggerStart {
		if !c.LoadedAt.IsZero() {
			at = c.LoadedAt
		}
	} else {
		s.ok.Add(1)
	}
	s.record(HistoryEntry{Version: c.Version, Hash: c.Hash, At: at, Result: ResultOK, Trigger: t, fingerprint: c.Fingerprint})
	s.keep(c)
}

// refused records a load attempt that published nothing.
func (s *Store) refused(hash string, err error, t Trigger) {
	s.fail.Add(1)
	s.record(HistoryEntry{Hash: hash, At: s.clock(), Result: ResultRefused, Err: err.Error(), Trigger: t})
}

func (s *Store) record(e HistoryEntry) {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	if len(s.history) == HistorySize {
		// Shift rather than ring: 20 entries, a few reloads a day.
		copy(s.history, s.history[1:])
		s.history = s.history[:HistorySize-1]
	}
	s.history = append(s.history, e)
}

// keep remembers c for Rollback, in the newest place, replacing a kept
// policy with the same fingerprint (the one rolled back to, or an earlier
// compile of the same files), and forgetting the oldest beyond KeptPolicies.
func (s *Store) keep(c *Compiled) {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	for i, k := range s.kept {
		if k.Fingerprint == c.Fingerprint {
			s.kept = append(s.kept[:i], s.kept[i+1:]...)
			break
		}
	}
	if len(s.kept) == KeptPolicies {
		s.kept = append(s.kept[:0], s.kept[1:]...)
	}
	s.kept = append(s.kept, c)
}

func (s *Store) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}
