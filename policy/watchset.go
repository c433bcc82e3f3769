package policy

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fsnotify/fsnotify"
)

// maxLinks bounds symlink resolution, like the kernel's ELOOP limit: a
// symlink loop ends the walk instead of hanging the watcher.
const maxLinks = 40

// watchSet is what the watcher listens to: the directories it watches, and
// the names in them whose events can change what the policy file or a file
// it references reads as.
//
// Names are kept with their directory fully resolved, and directories are
// watched by their resolved path, so that an event's name (the watched
// directory joined with the entry's name) compares as a plain string however
// the policy's path was spelled (/tmp on macOS is a symlink, for one).
type watchSet struct {
	w      *fsnotify.Watcher
	policy string // absolute path of the policy file
	// dirs are the directories watched now, resolved.
	dirs map[string]bool
	// names are the relevant entries, "resolved dir/entry".
	names map[string]bool
}

func newWatchSet(w *fsnotify.Watcher, policyPath string) *watchSet {
	return &watchSet{w: w, policy: policyPath, dirs: map[string]bool{}, names: map[string]bool{}}
}

// relevant reports whether an event on name may change the policy.
func (ws *watchSet) relevant(name string) bool { return ws.names[filepath.Clean(name)] }

// update recomputes the set for the policy file and the files it references
// (refs), watches the directories that now matter and stops watching the
// ones that no longer do. It reports whether the relevant names changed. Its
// error is the policy directory's: without that watch there is no hot
// reload. A referenced file's directory that cannot be watched only loses
// that file's events.
func (ws *watchSet) update(refs []string) (changed bool, err error) {
	policyDir := resolvedDir(ws.policy)
	names := map[string]bool{}
	dirs := map[string]bool{policyDir: true}
	for _, f := range append([]string{ws.policy}, refs...) {
		for _, n := range resolution(f) {
			// Every name on the way counts, not only the file: a directory
			// on the path that is replaced changes what the path reads.
			for a := n; ; a = filepath.Dir(a) {
				names[filepath.Join(resolvedDir(a), filepath.Base(a))] = true
				if filepath.Dir(a) == a {
					break
				}
			}
		}
		// The directories of the file as named and of the file finally read:
		// the first sees renames and symlink swaps next to the file, the
		// second edits made in place to a symlink's target. The symlinks in
		// between are reached through one of those or are outside the
		// policy's concern (/tmp itself on macOS).
		dirs[resolvedDir(f)] = true
		if r, err := filepath.EvalSymlinks(f); err == nil {
			dirs[filepath.Dir(r)] = true
		}
	}
	// Added again every time, not only when new: a watched directory that
	// was deleted and created again (a target directory rewritten) has lost
	// its watch, and adding an existing watch costs one syscall.
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		if aerr := ws.w.Add(d); aerr != nil && d == policyDir {
			err = aerr
		}
	}
	for d := range ws.dirs {
		if !dirs[d] {
			_ = ws.w.Remove(d) // already gone when the directory was deleted
		}
	}
	ws.dirs = dirs
	changed = len(names) != len(ws.names)
	for n := range names {
		if !ws.names[n] {
			changed = true
		}
	}
	ws.names = names
	return changed, err
}

// resolvedDir returns p's directory with every symlink in it resolved, or
// as it is when it cannot be resolved (it does not exist yet).
func resolvedDir(p string) string {
	d := filepath.Dir(p)
	if r, err := filepath.EvalSymlinks(d); err == nil {
		return r
	}
	return d
}

// resolution returns the paths that opening p goes through: p, and for
// each symlink met on the way (left to right, as the kernel meets them) the
// symlink and the path it leads to. The last is the file finally read. A
// component that does not exist ends the walk: its creation is an event on
// a name already returned.
func resolution(p string) []string {
	p = filepath.Clean(p)
	out := []string{p}
	for range maxLinks {
		link, rest, target, ok := firstSymlink(p)
		if !ok {
			break
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(link), target)
		}
		p = filepath.Join(target, rest)
		out = append(out, link, p)
	}
	return out
}

// firstSymlink finds the first component of the absolute path p that is a
// symlink, and returns its path, the rest of p after it and what it points
// to.
func firstSymlink(p string) (link, rest, target string, ok bool) {
	vol := filepath.VolumeName(p)
	parts := strings.Split(p[len(vol):], string(filepath.Separator))
	cur := vol + string(filepath.Separator)
	for i, part := range parts {
		if part == "" {
			continue
		}
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if err != nil {
			return "", "", "", false
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			continue
		}
		target, err := os.Readlink(cur)
		if err != nil {
			return "", "", "", false
		}
		return cur, filepath.Join(parts[i+1:]...), target, true
	}
	return "", "", "", false
}
