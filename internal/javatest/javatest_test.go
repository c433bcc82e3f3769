package javatest

import (
	"archive/zip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeJavac writes a javac that records each run in the file $RUNS and
// writes Fake.class (holding the first source's text) to its -d directory;
// it fails when the source says "broken".
func fakeJavac(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	// A JDK's layout: JDK/bin/javac beside JDK/release.
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "release"), []byte("JAVA_VERSION=\"17.0.99\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	javac := filepath.Join(dir, "bin", "javac")
	script := `#!/bin/sh
echo "$*" >> "$RUNS"
out=
while [ $# -gt 1 ]; do
	case "$1" in -d) out=$2; shift;; esac
	shift
done
if grep -q broken "$1"; then echo "error: broken" >&2; exit 1; fi
cat "$1" > "$out/Fake.class"
`
	if err := os.WriteFile(javac, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return javac
}

// Classes are compiled once per source and JDK: a second Compile of the
// same source reuses the first's (javac does not run), a changed source or
// another JDK compiles afresh into an entry of its own, and a failed
// compile leaves nothing that a later Compile would take for classes.
func TestCompileReusesClassesOfTheSameInputsOnly(t *testing.T) {
	// Not parallel: t.Setenv points the user's cache directory at the test's.
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	runs := filepath.Join(t.TempDir(), "runs")
	t.Setenv("RUNS", runs)
	javac := fakeJavac(t)
	src := filepath.Join(t.TempDir(), "Fake.java")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(src, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	nruns := func() int {
		data, _ := os.ReadFile(runs)
		return strings.Count(string(data), "\n")
	}
	compile := func() string {
		t.Helper()
		dir, err := Compile(javac, src)
		if err != nil {
			t.Fatal(err)
		}
		return dir
	}
	class := func(dir string) string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dir, "Fake.class"))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}

	write("class Fake {}")
	first := compile()
	if got := class(first); got != "class Fake {}" || nruns() != 1 {
		t.Fatalf("first compile: class %q after %d javac runs; want the source's, after 1", got, nruns())
	}
	if data, _ := os.ReadFile(runs); !strings.Contains(string(data), "-J-XX:TieredStopAtLevel=1 -J-XX:+UseSerialGC -d ") {
		t.Errorf("javac ran without the quick JVM options: %s", data)
	}
	if again := compile(); again != first || nruns() != 1 {
		t.Errorf("same source: dir %s after %d javac runs; want %s, javac not run again", again, nruns(), first)
	}

	write("class Fake { int x; }")
	changed := compile()
	if changed == first || class(changed) != "class Fake { int x; }" || nruns() != 2 {
		t.Errorf("changed source: dir %s (first %s), class %q, %d javac runs; want a new entry of the new source, javac run again", changed, first, class(changed), nruns())
	}
	if class(first) != "class Fake {}" {
		t.Error("the first entry was overwritten")
	}

	// Another JDK (another release) is another key.
	if err := os.WriteFile(filepath.Join(filepath.Dir(filepath.Dir(javac)), "release"), []byte("JAVA_VERSION=\"17.0.100\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if other := compile(); other == changed || nruns() != 3 {
		t.Errorf("new JDK: dir %s after %d javac runs; want a new entry, javac run again", other, nruns())
	}

	write("class Fake { broken }")
	if dir, err := Compile(javac, src); err == nil || !strings.Contains(err.Error(), "error: broken") {
		t.Fatalf("broken source: dir %s, err %v; want javac's error", dir, err)
	}
	if _, err := Compile(javac, src); err == nil || nruns() != 5 {
		t.Errorf("broken source again: err %v after %d javac runs; want javac run again (nothing cached), failing", err, nruns())
	}
}

// An entry's classes are also in its jar, which RunOptions puts on the
// class path; the first run is told to write a class data sharing archive
// at its exit under a name of its own, done keeps it, and the runs after
// map it. A run while the first writes the archive goes without one. A run
// that wrote nothing leaves nothing.
func TestRunOptionsArchiveOnceThenShare(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("RUNS", filepath.Join(t.TempDir(), "runs"))
	src := filepath.Join(t.TempDir(), "Fake.java")
	if err := os.WriteFile(src, []byte("class Fake {}"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir, err := Compile(fakeJavac(t), src)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.OpenReader(filepath.Join(dir, "classes.jar"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	zr.Close()
	if !slices.Equal(names, []string{"Fake.class"}) {
		t.Errorf("classes.jar holds %v; want [Fake.class]", names)
	}

	opt := func(opts []string, prefix string) string {
		for _, o := range opts {
			if v, ok := strings.CutPrefix(o, prefix); ok {
				return v
			}
		}
		return ""
	}
	// A run that writes no archive (it failed): nothing is kept.
	_, done := RunOptions(dir)
	done()
	if _, err := os.Stat(filepath.Join(dir, "app.jsa")); err == nil {
		t.Fatal("an archive was kept though the run wrote none")
	}
	opts, done := RunOptions(dir)
	if i := slices.Index(opts, "-cp"); i < 0 || i+1 >= len(opts) || opts[i+1] != filepath.Join(dir, "classes.jar") {
		t.Errorf("options %v; want -cp %s", opts, filepath.Join(dir, "classes.jar"))
	}
	if !slices.Contains(opts, "-XX:TieredStopAtLevel=1") || !slices.Contains(opts, "-Xlog:all=warning:stderr") {
		t.Errorf("options %v lack the quick JVM options or the JVM's warnings on stderr", opts)
	}
	tmp := opt(opts, "-XX:ArchiveClassesAtExit=")
	if tmp == "" || filepath.Dir(tmp) != dir || tmp == filepath.Join(dir, "app.jsa") || opt(opts, "-XX:SharedArchiveFile=") != "" {
		t.Fatalf("first run's options %v; want an archive written at exit, under a name of its own in %s", opts, dir)
	}
	if other, _ := RunOptions(dir); opt(other, "-XX:ArchiveClassesAtExit=") != "" || opt(other, "-XX:SharedArchiveFile=") != "" {
		t.Errorf("a run while the first writes the archive: options %v; want no archive written or read", other)
	}
	if err := os.WriteFile(tmp, []byte("archive"), 0o644); err != nil { // the JVM's, at its exit
		t.Fatal(err)
	}
	done()
	opts, done = RunOptions(dir)
	done()
	if got := opt(opts, "-XX:SharedArchiveFile="); got != filepath.Join(dir, "app.jsa") || opt(opts, "-XX:ArchiveClassesAtExit=") != "" {
		t.Errorf("run after the archive was kept: options %v; want -XX:SharedArchiveFile=%s only", opts, filepath.Join(dir, "app.jsa"))
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "app.jsa")); string(data) != "archive" {
		t.Errorf("kept archive holds %q; want the first run's", data)
	}
}

// An entry no run has used for a while is removed at the next compile of
// another source, one in use is kept (a hit counts as a use), and so is
// one used recently.
func TestCompileTrimsEntriesUnusedForLong(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("RUNS", filepath.Join(t.TempDir(), "runs"))
	javac := fakeJavac(t)
	srcDir := t.TempDir()
	compile := func(name, text string) string {
		t.Helper()
		src := filepath.Join(srcDir, name)
		if err := os.WriteFile(src, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		dir, err := Compile(javac, src)
		if err != nil {
			t.Fatal(err)
		}
		return dir
	}
	age := func(dir string, d time.Duration) {
		t.Helper()
		old := time.Now().Add(-d)
		if err := os.Chtimes(filepath.Join(dir, ".complete"), old, old); err != nil {
			t.Fatal(err)
		}
	}
	stale := compile("A.java", "class A {}")
	hit := compile("B.java", "class B {}")
	recent := compile("C.java", "class C {}")
	age(stale, 31*24*time.Hour)
	age(hit, 31*24*time.Hour)
	age(recent, 29*24*time.Hour)
	if again := compile("B.java", "class B {}"); again != hit {
		t.Fatalf("a hit compiled again into %s", again)
	}
	compile("D.java", "class D {}") // a miss: trims
	for dir, want := range map[string]bool{stale: false, hit: true, recent: true} {
		if _, err := os.Stat(dir); (err == nil) != want {
			t.Errorf("entry %s there: %v; want %v", filepath.Base(dir), err == nil, want)
		}
	}
}

// Without a usable cache directory the entries go to a directory of the
// user's own in the temporary directory, never to one others may write.
func TestCacheRootFallsBackToAPrivateTemporaryDirectory(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", notADir)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	root, err := cacheRoot()
	if err != nil || filepath.Dir(root) != tmp {
		t.Fatalf("cacheRoot() = %s, %v; want a directory in %s", root, err, tmp)
	}
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	if root, err := cacheRoot(); err == nil {
		t.Errorf("cacheRoot() = %s with the directory writable by all; want an error", root)
	}
}
