package policy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fileStore is a store started from a policy file with version v1, and the
// file's path, for reload and rollback tests.
func fileStore(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.json")
	writeVersion(t, path, "v1")
	c, err := compileTest(path, mustRead(t, path))
	if err != nil {
		t.Fatal(err)
	}
	return NewStore(c), path
}

func writeVersion(t *testing.T, path, v string) {
	t.Helper()
	writeFile(t, path, policyWithVersion(v))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// summary renders history as "trigger:result:version[*]" newest first, *
// marking the active entry.
func summary(h []HistoryEntry) string {
	parts := make([]string, 0, len(h))
	for _, e := range h {
		s := fmt.Sprintf("%s:%s:%s", e.Trigger, e.Result, e.Version)
		if e.Active {
			s += "*"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func TestHistoryRecordsStartReloadsAndRefusals(t *testing.T) {
	s, path := fileStore(t)
	v1 := s.Load()

	writeVersion(t, path, "v2")
	if r := s.ReloadAs(TriggerWatch, path, compileTest); !r.Changed || r.Policy == nil {
		t.Fatalf("reload to v2 = %+v", r)
	}
	// An unchanged file is not a load attempt worth a line.
	if r := s.Reload(path, compileTest); r.Changed {
		t.Fatalf("unchanged reload = %+v; want Changed false", r)
	}
	broken := `{"upstreams": 1}`
	writeFile(t, path, broken)
	if r := s.Reload(path, compileTest); r.Err == nil {
		t.Fatal("broken policy was not refused")
	}

	h := s.History()
	if got, want := summary(h), "sighup:refused: watch:ok:v2* start:ok:v1"; got != want {
		t.Fatalf("history = %s; want %s", got, want)
	}
	if h[0].Hash != hashOf([]byte(broken)) || !strings.Contains(h[0].Err, "upstreams: expected an object") {
		t.Errorf("refused entry = %+v; want the broken file's hash and the reason", h[0])
	}
	if h[2].Hash != v1.Hash || !h[2].At.Equal(v1.LoadedAt) {
		t.Errorf("start entry = %+v; want v1's hash and load time", h[2])
	}
	if ok, failed := s.Reloads(); ok != 1 || failed != 1 {
		t.Errorf("Reloads = %d ok, %d failed; want 1, 1 (start is not a reload)", ok, failed)
	}
}

// TestRollbackStaysUntilTheFileChanges protects the documented contract
// between rollback and the watcher: events that find the file as it was do
// not undo a rollback; a changed file does.
func TestRollbackStaysUntilTheFileChanges(t *testing.T) {
	s, path := fileStore(t)
	v1 := s.Load()
	writeVersion(t, path, "v2")
	s.ReloadAs(TriggerWatch, path, compileTest)
	v2 := s.Load()

	c, err := s.Rollback(strings.ToUpper(v1.Hash[:MinHashPrefix]))
	if err != nil || c != v1 || s.Load() != v1 {
		t.Fatalf("Rollback = %v, %v; current %q; want v1", c, err, s.Load().Version)
	}
	if got, want := summary(s.History()), "rollback:ok:v1* watch:ok:v2 start:ok:v1"; got != want {
		t.Fatalf("history = %s; want %s", got, want)
	}
	if ok, _ := s.Reloads(); ok != 2 {
		t.Errorf("ok reloads = %d; want 2 (a rollback counts)", ok)
	}

	// The watcher fires for an unrelated file in the directory; SIGHUP.
	for _, trig := range []Trigger{TriggerWatch, TriggerSIGHUP} {
		r := s.ReloadAs(trig, path, compileTest)
		if r.Changed || !r.RollbackKept || s.Load() != v1 {
			t.Fatalf("%s with the file unchanged = %+v, current %q; want the rollback kept", trig, r, s.Load().Version)
		}
	}

	// The file changes: the next good reload replaces the rollback.
	writeVersion(t, path, "v3")
	if r := s.ReloadAs(TriggerWatch, path, compileTest); !r.Changed || s.Load().Version != "v3" {
		t.Fatalf("reload after the file changed = %+v; want v3", r)
	}

	// Back to v2 by rollback; the file is broken, then restored to v3: it
	// changed, so v3 replaces the rollback even though it equals what the
	// file held before.
	if _, err := s.Rollback(v2.Hash); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, `{`)
	s.ReloadAs(TriggerWatch, path, compileTest)
	writeVersion(t, path, "v3")
	if r := s.ReloadAs(TriggerWatch, path, compileTest); !r.Changed || s.Load().Version != "v3" {
		t.Fatalf("reload of a file that was broken and restored = %+v, current %q; want v3", r, s.Load().Version)
	}
}

func TestRollbackRefusesBadUnknownAndAmbiguousHashes(t *testing.T) {
	s := NewStore(&Compiled{Version: "a", Hash: "abcdef0111111111", Fingerprint: "fa"})
	s.reload.Lock()
	s.publish(&Compiled{Version: "b", Hash: "abcdef0122222222", Fingerprint: "fb"}, TriggerWatch)
	// The same file compiled with a rotated key: same hash, new fingerprint.
	rotated := &Compiled{Version: "b", Hash: "abcdef0122222222", Fingerprint: "fb2"}
	s.publish(rotated, TriggerWatch)
	s.publish(&Compiled{Version: "c", Hash: "1234567890", Fingerprint: "fc"}, TriggerWatch)
	s.reload.Unlock()

	for _, tc := range []struct {
		hash string
		want error
	}{
		{"abcdef0", ErrBadHash},
		{"abcdef0x", ErrBadHash},
		{"", ErrBadHash},
		{"ffffffff", ErrUnknownPolicy},
		{"abcdef01", ErrAmbiguousHash},
	} {
		if _, err := s.Rollback(tc.hash); !errors.Is(err, tc.want) {
			t.Errorf("Rollback(%q) = %v; want %v", tc.hash, err, tc.want)
		}
	}
	// A full hash shared by two kept policies picks the newer one.
	if c, err := s.Rollback("abcdef0122222222"); err != nil || c != rotated {
		t.Errorf("Rollback(shared hash) = %+v, %v; want the newest with that hash", c, err)
	}
}

func TestHistoryAndKeptPoliciesAreBounded(t *testing.T) {
	s, path := fileStore(t)
	first := s.Load()
	for i := 2; i <= 25; i++ {
		writeVersion(t, path, fmt.Sprintf("v%d", i))
		if r := s.ReloadAs(TriggerWatch, path, compileTest); r.Policy == nil {
			t.Fatalf("reload v%d: %+v", i, r)
		}
	}
	h := s.History()
	if len(h) != HistorySize || h[0].Version != "v25" || h[HistorySize-1].Version != "v6" {
		t.Fatalf("history has %d entries, %q … %q; want %d, v25 … v6", len(h), h[0].Version, h[len(h)-1].Version, HistorySize)
	}
	kept := s.Kept()
	if len(kept) != KeptPolicies || kept[0].Version != "v25" || kept[KeptPolicies-1].Version != "v16" {
		t.Fatalf("kept %d policies, %q … %q; want %d, v25 … v16", len(kept), kept[0].Version, kept[len(kept)-1].Version, KeptPolicies)
	}
	if _, err := s.Rollback(first.Hash); !errors.Is(err, ErrUnknownPolicy) {
		t.Errorf("rollback to a forgotten policy = %v; want ErrUnknownPolicy", err)
	}
	// Rolling back to a kept policy makes it the newest kept one, so that
	// it is not the next to be forgotten.
	if _, err := s.Rollback(kept[KeptPolicies-1].Hash); err != nil {
		t.Fatal(err)
	}
	if k := s.Kept(); k[0].Version != "v16" || len(k) != KeptPolicies {
		t.Errorf("after rollback kept[0] = %q (%d kept); want v16", k[0].Version, len(k))
	}
}
