package policy

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultDebounce is how long the watcher waits after the last relevant file
// event before reloading: editors write a file in several steps, and the
// kubelet swaps a ConfigMap with several renames.
const DefaultDebounce = 100 * time.Millisecond

// maxWaitDebounces is MaxWait's default, in debounce periods: 1s with the
// default debounce.
const maxWaitDebounces = 10

// WatchOptions configure Store.Watch. The zero value is the default.
type WatchOptions struct {
	// Debounce is how long the watcher waits after the last relevant event
	// before it reloads. 0 means DefaultDebounce.
	Debounce time.Duration
	// MaxWait bounds how long a steady stream of events can put a reload
	// off: the reload happens at most MaxWait after the first event of a
	// burst, however many follow. 0 means 10 × Debounce (1s by default);
	// less than Debounce means Debounce.
	MaxWait time.Duration
	// OnResult, when set, receives every reload attempt that changed
	// something (a new policy, a new refusal) and the watcher's errors.
	// It runs on the watcher's goroutine: the next reload waits for it.
	OnResult func(ReloadResult)
	// Ready, when set, is called once the directories are watched: a change
	// made after Ready is called is seen. Not called if Watch fails first.
	Ready func()
}

// delays returns the debounce and the maximum wait, defaults applied.
func (o WatchOptions) delays() (debounce, maxWait time.Duration) {
	debounce, maxWait = o.Debounce, o.MaxWait
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	if maxWait == 0 {
		maxWait = maxWaitDebounces * debounce
	}
	if maxWait < debounce {
		maxWait = debounce
	}
	return debounce, maxWait
}

// Watch reloads path whenever it, or a file it references, changes, until
// ctx ends. There should be one Watch per store.
//
// It watches directories, not files: editors replace a file by rename, and
// Kubernetes updates a ConfigMap or Secret volume by swapping its "..data"
// symlink, neither of which a watch on the old inode would see. Of the
// events in those directories only the ones on a name the policy file or a
// referenced file resolves through (the file, each symlink on the way, the
// file finally read) start a reload; anything else there, detour's own log
// file for one, is ignored. Otherwise a log in the policy's directory
// reloads the policy for every line it gets, including the line saying a
// reload was refused.
//
// Each attempt that changed something is reported to opts.OnResult.
func (s *Store) Watch(ctx context.Context, path string, compile CompileFunc, opts WatchOptions) error {
	debounce, maxWait := opts.delays()
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	ws := newWatchSet(w, abs)
	if _, err := ws.update(s.readRefs()); err != nil {
		return err
	}
	if opts.Ready != nil {
		opts.Ready()
	}
	report := func(r ReloadResult) {
		if opts.OnResult != nil {
			opts.OnResult(r)
		}
	}

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	// burst is when the first event of the pending burst arrived; zero when
	// no reload is pending.
	var burst time.Time
	schedule := func() {
		now := time.Now()
		if burst.IsZero() {
			burst = now
		}
		// Each event moves the reload to debounce from now, but never past
		// maxWait from the burst's first event: a file written to without
		// pause is still reloaded.
		at := now.Add(debounce)
		if limit := burst.Add(maxWait); at.After(limit) {
			at = limit
		}
		timer.Reset(at.Sub(now))
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
			burst = time.Time{}
			if r := s.ReloadAs(TriggerWatch, abs, compile); r.Changed {
				report(r)
			}
			// The reload may have swapped a symlink's target or named other
			// files. Events that arrived meanwhile wait in the channel and
			// are judged against the new set.
			_, _ = ws.update(s.readRefs())
		case <-s.refsRead:
			// A SIGHUP reload (or this watcher's own, already handled). If
			// it changed what the policy reads, events for the new names
			// may have been ignored before now: reload once to be sure.
			if changed, _ := ws.update(s.readRefs()); changed {
				schedule()
			}
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("policy watcher closed")
			}
			if ws.relevant(ev.Name) {
				schedule()
			}
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("policy watcher closed")
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				// The kernel dropped events; one of them may have mattered.
				schedule()
				continue
			}
			report(ReloadResult{Changed: true, Err: err})
		}
	}
}
