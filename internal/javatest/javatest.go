// Package javatest compiles the Java apps of detour's tests (the unmodified
// clients in internal/clientmatrix/testdata and internal/devrun/testdata)
// once per source and JDK, not once per test run: javac is a JVM that
// spends one to two seconds of CPU on a file of a hundred lines, every time.
//
// The classes are kept, as Go keeps its build cache, in the user's cache
// directory (os.UserCacheDir, else the system temporary directory), under
// a key that covers everything that decides the bytes javac writes: the
// sources' names and contents, and the JDK that compiles them (its release
// file, which names its exact build, and javac's own file). A changed
// source or a new JDK compiles afresh; nothing is ever reused for another
// input. RunOptions runs the classes with class data sharing, from an
// archive kept in the same entry. Only tests import it.
package javatest

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// QuickJVM are the options that make a short-lived JVM cheap: the first
// JIT tier only and the serial collector (one GC thread). A run of a few
// seconds spends most of its CPU compiling with the optimising tier and
// starting GC threads; what the program does is the same.
var QuickJVM = []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"}

// cacheVersion changes when the layout of an entry does.
const cacheVersion = "javatest-2"

// okFile marks an entry javac completed; an entry is only ever renamed
// into place whole, so it is there in every entry found.
const okFile = ".complete"

// Compile returns a directory holding the classes javac (a path, as
// exec.LookPath found it) compiles from srcs, compiling them only when no
// earlier run did for the same sources and JDK. Test binaries running at
// once (go test runs packages in parallel) may both compile; one entry
// wins and both get classes of the same inputs.
func Compile(javac string, srcs ...string) (string, error) {
	if len(srcs) == 0 {
		return "", errors.New("javatest: no sources")
	}
	key, err := cacheKey(javac, srcs)
	if err != nil {
		return "", err
	}
	root, err := cacheRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, key)
	if _, err := os.Stat(filepath.Join(dir, okFile)); err == nil {
		// Used now: trim keeps it.
		now := time.Now()
		_ = os.Chtimes(filepath.Join(dir, okFile), now, now)
		return dir, nil
	}
	// A miss is rare (a changed source, a new JDK): the time to drop the
	// entries no run has used for a while, as Go trims its build cache.
	trim(root, time.Now())
	tmp, err := os.MkdirTemp(root, "tmp-")
	if err != nil {
		return "", fmt.Errorf("javatest: %w", err)
	}
	defer os.RemoveAll(tmp) // gone once renamed; left over only on failure
	args := append(append(prefixed("-J", QuickJVM), "-d", tmp), srcs...)
	cmd := exec.Command(javac, args...)
	// The machine's own options are no input of the key.
	cmd.Env = append(os.Environ(), "JAVA_TOOL_OPTIONS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("javac %v: %v\n%s", srcs, err, out)
	}
	if err := writeJar(filepath.Join(tmp, jarFile), tmp); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, okFile), nil, 0o644); err != nil {
		return "", fmt.Errorf("javatest: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another test binary put the same entry in place first.
		if _, serr := os.Stat(filepath.Join(dir, okFile)); serr == nil {
			return dir, nil
		}
		return "", fmt.Errorf("javatest: %w", err)
	}
	return dir, nil
}

// The files of an entry besides the classes: the classes again as a jar
// (class data sharing archives only classes loaded from jars) and the
// archive of the classes a run of the app loaded.
const (
	jarFile     = "classes.jar"
	archiveFile = "app.jsa"
)

// RunOptions returns the JVM options that run a main class of dir (an
// entry Compile returned) with class data sharing: the classes the JVM
// loads for the app (its own and the JDK's: java.net.http, TLS) are mapped
// from an archive a run before this one wrote, instead of being read,
// parsed and verified again, which is a quarter of a short-lived JVM's CPU.
// The first run writes the archive at its exit (then costing more than a
// run without), and done, called once the JVM has exited, keeps it for the
// runs after. What the app does is the same: an archive the JVM finds
// unusable (another JDK) is ignored. The JVM's own warnings go to stderr,
// never into the app's output.
func RunOptions(dir string) (opts []string, done func()) {
	opts = append(opts, QuickJVM...)
	// All of the JVM's log output to stderr, warnings only (its default is
	// warnings on stdout).
	opts = append(opts, "-Xlog:disable", "-Xlog:all=warning:stderr")
	archive := filepath.Join(dir, archiveFile)
	done = func() {}
	if _, err := os.Stat(archive); err == nil {
		opts = append(opts, "-XX:SharedArchiveFile="+archive)
	} else if unlock, ok := lockArchive(archive); ok {
		// One run writes the archive (writing it costs the run a second
		// of CPU); runs meanwhile go without one. It is written under a
		// name of its own and renamed into place only once complete.
		tmp := archive + ".tmp"
		os.Remove(tmp)
		opts = append(opts, "-XX:ArchiveClassesAtExit="+tmp)
		done = func() {
			if fi, err := os.Stat(tmp); err == nil && fi.Size() > 0 {
				_ = os.Rename(tmp, archive)
			}
			os.Remove(tmp)
			unlock()
		}
	}
	return append(opts, "-cp", filepath.Join(dir, jarFile)), done
}

// staleLock is the age at which a lock of a run that never called done
// (a killed test binary) is taken over.
const staleLock = 10 * time.Minute

// lockArchive makes archive's lock file; ok is false while another run
// holds it.
func lockArchive(archive string) (unlock func(), ok bool) {
	lock := archive + ".lock"
	for range 2 {
		f, err := os.OpenFile(lock, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			f.Close()
			return func() { os.Remove(lock) }, true
		}
		fi, serr := os.Stat(lock)
		if !errors.Is(err, fs.ErrExist) || serr != nil || time.Since(fi.ModTime()) < staleLock {
			return nil, false
		}
		os.Remove(lock)
	}
	return nil, false
}

// writeJar writes the .class files under dir to a jar (a zip file)
// at path.
func writeJar(path, dir string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("javatest: %w", err)
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".class") {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		w, err := zw.Create(filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	})
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		return fmt.Errorf("javatest: writing %s: %w", path, err)
	}
	return nil
}

// unusedFor is how long an entry may go unused before trim removes it.
const unusedFor = 30 * 24 * time.Hour

// trim removes from root the entries last used (their okFile touched)
// before now-unusedFor, and what a compile that never finished left
// (tmp-* directories) a day old.
func trim(root string, now time.Time) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(root, e.Name())
		if strings.HasPrefix(e.Name(), "tmp-") {
			if fi, err := os.Stat(p); err == nil && now.Sub(fi.ModTime()) > 24*time.Hour {
				os.RemoveAll(p)
			}
			continue
		}
		if fi, err := os.Stat(filepath.Join(p, okFile)); err == nil && now.Sub(fi.ModTime()) > unusedFor {
			os.RemoveAll(p)
		}
	}
}

// prefixed returns opts each with prefix ("-J" passes an option through
// javac or keytool to their JVM).
func prefixed(prefix string, opts []string) []string {
	out := make([]string, len(opts))
	for i, o := range opts {
		out[i] = prefix + o
	}
	return out
}

// cacheKey hashes what decides javac's output: the sources (name and
// bytes) and the JDK (javac's resolved file and the JDK's release file,
// which names its version and build).
func cacheKey(javac string, srcs []string) (string, error) {
	h := sha256.New()
	field := func(b []byte) {
		h.Write([]byte(strconv.Itoa(len(b)) + ":"))
		h.Write(b)
	}
	field([]byte(cacheVersion))
	real, err := filepath.EvalSymlinks(javac)
	if err != nil {
		return "", fmt.Errorf("javatest: %w", err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("javatest: %w", err)
	}
	field([]byte(fmt.Sprintf("%s %d %d", real, fi.Size(), fi.ModTime().UnixNano())))
	// javac is JDK/bin/javac; a JDK without a release file is keyed by
	// javac's file alone.
	release, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(real)), "release"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("javatest: %w", err)
	}
	field(release)
	for _, src := range srcs {
		data, err := os.ReadFile(src)
		if err != nil {
			return "", fmt.Errorf("javatest: %w", err)
		}
		field([]byte(filepath.Base(src)))
		field(data)
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// cacheRoot is the directory of the entries, made if need be.
func cacheRoot() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	root := filepath.Join(base, "detour-javatest")
	if err := os.MkdirAll(root, 0o755); err != nil {
		// A read-only home: the temporary directory still works.
		root = filepath.Join(os.TempDir(), "detour-javatest-"+strconv.Itoa(os.Getuid()))
		if err := os.MkdirAll(root, 0o700); err != nil {
			return "", fmt.Errorf("javatest: %w", err)
		}
		// Anyone may make a directory in the temporary directory: classes
		// in one this user does not own alone are not run.
		fi, err := os.Lstat(root)
		if err != nil {
			return "", fmt.Errorf("javatest: %w", err)
		}
		if !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 || !ownedByMe(fi) {
			return "", fmt.Errorf("javatest: %s is not a directory of this user's alone", root)
		}
	}
	return root, nil
}
