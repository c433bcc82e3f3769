package main

import (
	"bytes"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The repository documents its own design (docs/architecture.md,
// docs/vendors.md, CONTRIBUTING.md). Comments and documents that cite a file
// a reader of the repository does not have send that reader nowhere, and a
// pointer to a heading that was renamed does the same; these tests keep both
// from creeping back.

// outsideDocuments are the names of the design notes detour was started
// from, which are not part of the repository. They are spelled in pieces so
// that this file does not cite them itself.
var outsideDocuments = []string{
	"DESIGN" + ".md",
	"STYLE" + ".md",
	"translation" + ".md",
	"provider-errors" + ".md",
	"model-codebases" + ".md",
	"interception-and-kubernetes" + ".md",
	"shared" + "/reference",
	"../" + "shared",
}

// repoFiles returns every regular file of the repository that a reader
// reads as text (source, docs, charts, CI scripts), with its content; the
// .git directory, fuzz corpora and node_modules (third-party packages that
// npm installs from a lock file, not part of the repository) are skipped.
func repoFiles(t *testing.T) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "node_modules" || (d.Name() == "fuzz" && filepath.Base(filepath.Dir(p)) == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.IndexByte(data, 0) >= 0 {
			return nil // binary
		}
		files[filepath.ToSlash(p)] = data
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("found only %d files; is the test running in the repository root?", len(files))
	}
	return files
}

// TestNoCitationOfDesignNotesOutsideTheRepository fails when a file in the
// repository points its reader at a design note that is not in it; the
// pointer belongs in docs/architecture.md, docs/vendors.md or
// CONTRIBUTING.md instead.
func TestNoCitationOfDesignNotesOutsideTheRepository(t *testing.T) {
	t.Parallel()
	files := repoFiles(t)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for i, line := range strings.Split(string(files[name]), "\n") {
			for _, doc := range outsideDocuments {
				if strings.Contains(line, doc) {
					t.Errorf("%s:%d cites %s, which is not in the repository: point at docs/architecture.md, docs/vendors.md or CONTRIBUTING.md instead", name, i+1, doc)
				}
			}
		}
	}
}

// headingAnchor is the anchor GitHub gives a Markdown heading: lower case,
// punctuation other than '-' and '_' dropped, spaces as '-'.
func headingAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	headingLine = regexp.MustCompile("^#{1,6} +(.+?) *#*$")
	fenceLine   = regexp.MustCompile("^ *(```|~~~)")
)

// anchorsOf returns the anchors of a Markdown file's headings (code blocks
// skipped), and the headings whose anchor repeats an earlier one.
func anchorsOf(md []byte) (anchors map[string]bool, dups []string) {
	anchors = map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(string(md), "\n") {
		if fenceLine.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if m := headingLine.FindStringSubmatch(line); m != nil {
			// Inline code keeps its text in the anchor, without the backticks.
			a := headingAnchor(strings.ReplaceAll(m[1], "`", ""))
			if n := seen[a]; n > 0 {
				// GitHub numbers a repeated anchor: the second is a-1.
				dups = append(dups, m[1])
				anchors[a+"-"+strconv.Itoa(n)] = true
			} else {
				anchors[a] = true
			}
			seen[a]++
		}
	}
	return anchors, dups
}

var (
	// repoAnchorRef is a repository-relative pointer to a section, as
	// comments write it: docs/vendors.md#anthropic-errors.
	repoAnchorRef = regexp.MustCompile(`\b((?:docs/[A-Za-z0-9_.-]+|CONTRIBUTING|README)\.md)#([A-Za-z0-9_-]+)`)
	// markdownLink is a Markdown link target with an anchor, relative to the
	// linking file: (vendors.md#usage), (#usage), (../CONTRIBUTING.md#style).
	markdownLink = regexp.MustCompile(`\]\(([^)\s#]*)#([A-Za-z0-9_-]+)\)`)
)

// designDocs are the documents comments point at; each heading in them must
// have an anchor of its own.
var designDocs = map[string]bool{"docs/architecture.md": true, "docs/vendors.md": true, "CONTRIBUTING.md": true}

// TestCitedDocAnchorsExist fails when a comment or a document points at a
// section of a Markdown file of the repository that has no such heading,
// and when a design doc has two headings with one anchor (GitHub numbers
// the second, so a pointer written for it lands on the first).
func TestCitedDocAnchorsExist(t *testing.T) {
	t.Parallel()
	files := repoFiles(t)
	anchors := map[string]map[string]bool{}
	for name, data := range files {
		if strings.HasSuffix(name, ".md") {
			a, dups := anchorsOf(data)
			anchors[name] = a
			if designDocs[name] {
				for _, d := range dups {
					t.Errorf("%s: heading %q repeats the anchor of an earlier one", name, d)
				}
			}
		}
	}
	for want := range designDocs {
		if anchors[want] == nil {
			t.Errorf("%s is missing", want)
		}
	}
	check := func(from string, line int, file, anchor string) {
		a, ok := anchors[file]
		switch {
		case !ok:
			t.Errorf("%s:%d points at %s#%s, but there is no %s", from, line, file, anchor, file)
		case !a[anchor]:
			t.Errorf("%s:%d points at %s#%s, which has no heading with that anchor", from, line, file, anchor)
		}
	}
	refs := 0
	for name, data := range files {
		for i, line := range strings.Split(string(data), "\n") {
			// Both patterns need a '#'; most lines have none, and skipping
			// them before the regexps keeps this test cheap under -race.
			if !strings.Contains(line, "#") {
				continue
			}
			for _, m := range repoAnchorRef.FindAllStringSubmatch(line, -1) {
				if strings.HasSuffix(name, ".md") && strings.Contains(line, "]("+m[0]) {
					continue // a relative Markdown link, checked below
				}
				refs++
				check(name, i+1, m[1], m[2])
			}
			if !strings.HasSuffix(name, ".md") {
				continue
			}
			for _, m := range markdownLink.FindAllStringSubmatch(line, -1) {
				target := name
				if m[1] != "" {
					if strings.Contains(m[1], "://") {
						continue
					}
					target = path.Clean(path.Join(path.Dir(name), m[1]))
				}
				refs++
				check(name, i+1, target, m[2])
			}
		}
	}
	if refs < 50 {
		t.Errorf("found only %d pointers to doc sections; the pattern no longer matches how the code cites them", refs)
	}
}
