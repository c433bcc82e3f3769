package policy

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The tiers the classifier picks besides classifier.undecided.
const (
	TierHard = "hard"
	TierEasy = "easy"
)

// Defaults of the classifier section.
const (
	DefaultLongInputChars = 2000
	DefaultCodeBlocks     = 2
	DefaultFiles          = 2
	// DefaultUndecidedTier is hard: when in doubt, the stronger chain.
	DefaultUndecidedTier = TierHard
)

// reasonTextMax bounds the matched text quoted in a pattern reason: enough
// to see why a pattern fired, short enough for a log line.
const reasonTextMax = 40

var tierName = regexp.MustCompile(`^[a-z0-9_-]+$`)

// TierInput is what the classifier looks at in one request. The caller
// extracts it from the app's body in whatever shape the app speaks.
type TierInput struct {
	// Text is the text of the app's latest user turn; patterns and code
	// blocks are looked for here only, since earlier turns say what the
	// conversation was about, not what is asked now.
	Text string
	// InputChars counts the characters (runes) of all input text: system
	// prompt and every message.
	InputChars int
	// Files counts attachments (images, documents, files, audio) in the
	// whole request.
	Files int
}

// Classifier sorts requests into tiers: a pure function of a TierInput and
// the policy's classifier section. Compile always sets one; a zero
// Classifier has every signal off and an empty undecided tier.
type Classifier struct {
	hard, easy []pattern
	// LongInputChars, CodeBlocks and Files are the thresholds at or above
	// which a request is hard; 0 turns the signal off (Compile never leaves
	// one at 0).
	LongInputChars int
	CodeBlocks     int
	Files          int
	// Undecided is the tier of a request no signal decided.
	Undecided string
}

// Classify returns the tier of a request and every signal that fired, in
// this order: long_input:N>=T, code_blocks:N>=T, files:N>=T,
// hard_pattern:"text", easy_pattern:"text" (the first match of the first
// pattern that matches, at most 40 characters), or undecided when none did.
// Any of the first four makes the request hard; else an easy pattern makes
// it easy; else it gets the undecided tier. Every signal is evaluated even
// once the tier is settled, so that the log shows all the reasons.
//
// Pattern reasons quote only the policy's own words (see firstMatch), so
// they are safe to log without log.prompts.
func (c *Classifier) Classify(in TierInput) (tier string, reasons []string) {
	// Room for the usual one or two reasons in one allocation.
	reasons = make([]string, 0, 2)
	hard := false
	if c.LongInputChars > 0 && in.InputChars >= c.LongInputChars {
		reasons = append(reasons, signal("long_input:", in.InputChars, c.LongInputChars))
		hard = true
	}
	if c.CodeBlocks > 0 {
		if n := codeBlocks(in.Text); n >= c.CodeBlocks {
			reasons = append(reasons, signal("code_blocks:", n, c.CodeBlocks))
			hard = true
		}
	}
	if c.Files > 0 && in.Files >= c.Files {
		reasons = append(reasons, signal("files:", in.Files, c.Files))
		hard = true
	}
	if m, ok := firstMatch(c.hard, in.Text); ok {
		reasons = append(reasons, quoted("hard_pattern:", m))
		hard = true
	}
	easy := false
	if m, ok := firstMatch(c.easy, in.Text); ok {
		reasons = append(reasons, quoted("easy_pattern:", m))
		easy = true
	}
	switch {
	case hard:
		return TierHard, reasons
	case easy:
		return TierEasy, reasons
	}
	return c.Undecided, append(reasons, "undecided")
}

// signal formats "name:N>=T" with one allocation.
func signal(name string, n, threshold int) string {
	var buf [64]byte
	b := append(buf[:0], name...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, ">="...)
	b = strconv.AppendInt(b, int64(threshold), 10)
	return string(b)
}

// quoted formats name followed by the matched text, cut to reasonTextMax
// characters and Go-quoted (so a newline in the prompt cannot break a log
// line), with one allocation for short matches.
func quoted(name, text string) string {
	if utf8.RuneCountInString(text) > reasonTextMax {
		n := 0
		for i := range text {
			if n == reasonTextMax {
				text = text[:i]
				break
			}
			n++
		}
	}
	var buf [128]byte
	b := append(buf[:0], name...)
	b = strconv.AppendQuote(b, text)
	return string(b)
}

// firstMatch returns the leftmost match of the first pattern that matches,
// as a reason that is safe to log: the matched text when the pattern is a
// word list (the text is then one of the policy's own words, in the app's
// letter case), else the pattern's index ("[2]"), since a free-form regexp
// can match any run of the user's prompt, which is never logged unless
// log.prompts says so.
func firstMatch(ps []pattern, text string) (string, bool) {
	for i := range ps {
		if start, end, ok := ps[i].find(text); ok {
			if ps[i].lits == nil {
				return "[" + strconv.Itoa(i) + "]", true
			}
			return text[start:end], true
		}
	}
	return "", false
}

// pattern is one compiled classifier pattern. Go's regexp scans an
// unanchored, case-insensitive alternation at about 1 MB/s (the NFA steps
// every alternative on every byte), so a pasted 8 KB document would cost
// milliseconds per request. Most patterns are word lists, though: a finite
// set of strings. For those, lits finds where the leftmost match starts with
// a plain scan, and the regexp only runs on the few bytes from there, to
// pick the exact text it would have matched.
type pattern struct {
	re   *regexp.Regexp
	lits *literalSet // nil: not a finite set of strings; re scans alone
}

func newPattern(re *regexp.Regexp) pattern {
	p := pattern{re: re}
	if sre, err := syntax.Parse(re.String(), syntax.Perl); err == nil {
		p.lits = newLiteralSet(sre.Simplify())
	}
	return p
}

// find returns the location of the leftmost match, as FindStringIndex does.
func (p *pattern) find(text string) (start, end int, ok bool) {
	if p.lits == nil {
		return loc(p.re.FindStringIndex(text))
	}
	start = p.lits.index(text)
	if start < 0 {
		return 0, 0, false
	}
	// No match starts before start, every match is at most maxRunes long,
	// and a finite set has no assertions (\b, ^, $) that the cut could
	// change: the regexp's leftmost-first pick within this window is the
	// one it would make in the whole text.
	end = start
	for n := 0; n < p.lits.maxRunes && end < len(text); n++ {
		_, w := utf8.DecodeRuneInString(text[end:])
		end += w
	}
	l := p.re.FindStringIndex(text[start:end])
	if l == nil {
		return loc(p.re.FindStringIndex(text)) // cannot happen; stay correct if it does
	}
	return start + l[0], start + l[1], true
}

func loc(l []int) (start, end int, ok bool) {
	if l == nil {
		return 0, 0, false
	}
	return l[0], l[1], true
}

// literalSet is the finite set of strings a pattern matches, each kept as
// runes folded to their canonical case (foldRune), so that a scan can
// compare text and strings rune by rune as (?i) does.
type literalSet struct {
	// The strings by their first rune, without it: an array for ASCII
	// first runes (the common case, looked up on every byte of the text),
	// a map for the others.
	ascii    [utf8.RuneSelf][][]rune
	other    map[rune][][]rune
	maxRunes int
}

// Bounds on expanding a pattern into its strings: beyond them the regexp
// alone is cheaper than the set.
const (
	maxLiterals     = 512
	maxLiteralRunes = 256
	maxClassRunes   = 32
)

// newLiteralSet expands a parsed pattern into its strings, or returns nil
// when it matches an infinite or too large set, uses assertions, or
// matches case-sensitively some letter that has other cases (foldRune
// would then match more than the pattern does).
func newLiteralSet(re *syntax.Regexp) *literalSet {
	strs, ok := expand(re)
	if !ok || len(strs) == 0 {
		return nil
	}
	s := &literalSet{other: map[rune][][]rune{}}
	for _, str := range strs {
		if len(str) == 0 {
			return nil // matches everywhere; Compile refuses such patterns anyway
		}
		if str[0] < utf8.RuneSelf {
			s.ascii[str[0]] = append(s.ascii[str[0]], str[1:])
		} else {
			s.other[str[0]] = append(s.other[str[0]], str[1:])
		}
		s.maxRunes = max(s.maxRunes, len(str))
	}
	return s
}

func expand(re *syntax.Regexp) ([][]rune, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return [][]rune{nil}, true
	case syntax.OpLiteral:
		out := make([]rune, len(re.Rune))
		for i, r := range re.Rune {
			if re.Flags&syntax.FoldCase == 0 && unicode.SimpleFold(r) != r {
				return nil, false
			}
			out[i] = foldRune(r)
		}
		return [][]rune{out}, true
	case syntax.OpCharClass:
		var rs [][]rune
		seen := map[rune]bool{}
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if re.Rune[i+1]-re.Rune[i] >= maxClassRunes {
				return nil, false
			}
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				// Folding is exact only if the class holds every case of
				// r, as a class under (?i) does.
				for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
					if !inClass(re.Rune, f) {
						return nil, false
					}
				}
				if c := foldRune(r); !seen[c] {
					seen[c] = true
					rs = append(rs, []rune{c})
				}
			}
			if len(rs) > maxClassRunes {
				return nil, false
			}
		}
		return rs, true
	case syntax.OpCapture:
		return expand(re.Sub[0])
	case syntax.OpQuest:
		sub, ok := expand(re.Sub[0])
		return append([][]rune{nil}, sub...), ok && len(sub) < maxLiterals
	case syntax.OpAlternate:
		var out [][]rune
		for _, sub := range re.Sub {
			strs, ok := expand(sub)
			if !ok || len(out)+len(strs) > maxLiterals {
				return nil, false
			}
			out = append(out, strs...)
		}
		return out, true
	case syntax.OpConcat:
		out := [][]rune{nil}
		for _, sub := range re.Sub {
			strs, ok := expand(sub)
			if !ok || len(out)*len(strs) > maxLiterals {
				return nil, false
			}
			next := make([][]rune, 0, len(out)*len(strs))
			for _, a := range out {
				for _, b := range strs {
					if len(a)+len(b) > maxLiteralRunes {
						return nil, false
					}
					next = append(next, append(append(make([]rune, 0, len(a)+len(b)), a...), b...))
				}
			}
			out = next
		}
		return out, true
	}
	return nil, false
}

func inClass(ranges []rune, r rune) bool {
	for i := 0; i+1 < len(ranges); i += 2 {
		if ranges[i] <= r && r <= ranges[i+1] {
			return true
		}
	}
	return false
}

// index returns the byte offset where the leftmost string of the set
// starts in text, or -1.
func (s *literalSet) index(text string) int {
	for i := 0; i < len(text); {
		var rests [][]rune
		w := 1
		if b := text[i]; b < utf8.RuneSelf {
			rests = s.ascii[asciiFold[b]]
		} else {
			var r rune
			r, w = utf8.DecodeRuneInString(text[i:])
			// Some runes fold to ASCII: the Kelvin sign to K, long s to S.
			if r = foldRune(r); r < utf8.RuneSelf {
				rests = s.ascii[r]
			} else {
				rests = s.other[r]
			}
		}
		for _, rest := range rests {
			if hasFoldedPrefix(text[i+w:], rest) {
				return i
			}
		}
		i += w
	}
	return -1
}

func hasFoldedPrefix(text string, want []rune) bool {
	for _, r := range want {
		if text == "" {
			return false
		}
		t, w := rune(text[0]), 1
		if t < utf8.RuneSelf {
			t = rune(asciiFold[t])
		} else {
			t, w = utf8.DecodeRuneInString(text)
			t = foldRune(t)
		}
		if t != r {
			return false
		}
		text = text[w:]
	}
	return true
}

// foldRune maps a rune to the smallest rune of its case orbit (k, K and
// the Kelvin sign all map to K), so that two runes are equal under (?i)
// exactly when their foldRune are.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		return rune(asciiFold[r])
	}
	if r >= 0x3400 && r <= 0x9FFF {
		// CJK ideographs, most of a Chinese prompt, have no case: skip
		// SimpleFold's table searches.
		return r
	}
	m := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		m = min(m, f)
	}
	return m
}

// asciiFold is foldRune for ASCII: upper case, the smallest of a letter's
// cases (no ASCII letter has a smaller case outside ASCII).
var asciiFold = func() (t [utf8.RuneSelf]byte) {
	for i := range t {
		t[i] = byte(unicode.ToUpper(rune(i)))
	}
	return t
}()

// codeBlocks counts ``` fenced blocks: fences are counted in pairs, and an
// unclosed fence (a paste cut short, or a block still being typed) counts
// as a block too. A fence is any run of three or more backticks, wherever
// it stands: apps send markdown loosely, and a fence not at the start of a
// line is still someone pasting code.
func codeBlocks(s string) int {
	fences := 0
	for {
		i := strings.Index(s, "```")
		if i < 0 {
			break
		}
		fences++
		s = strings.TrimLeft(s[i+3:], "`")
	}
	return (fences + 1) / 2
}

// classifier compiles the classifier section; absent, every default.
func (k *compiler) classifier(cf *ClassifierFile) {
	c := &Classifier{
		LongInputChars: DefaultLongInputChars,
		CodeBlocks:     DefaultCodeBlocks,
		Files:          DefaultFiles,
		Undecided:      DefaultUndecidedTier,
	}
	k.c.Classifier = c
	k.undecidedOK = true
	if cf == nil {
		return
	}
	c.hard = k.patterns("classifier.hard_patterns", cf.HardPatterns)
	c.easy = k.patterns("classifier.easy_patterns", cf.EasyPatterns)
	c.LongInputChars = k.count("classifier.long_input_chars", cf.LongInputChars, c.LongInputChars, 0)
	c.CodeBlocks = k.count("classifier.code_blocks", cf.CodeBlocks, c.CodeBlocks, 0)
	c.Files = k.count("classifier.files", cf.Files, c.Files, 0)
	switch {
	case cf.Undecided == "":
	case !tierName.MatchString(cf.Undecided):
		k.errorf("classifier.undecided", "a tier name: lowercase letters, digits, '_' and '-'; got %q", cf.Undecided)
		k.undecidedOK = false
	default:
		c.Undecided = cf.Undecided
	}
}

// patterns compiles a list of classifier patterns, case-insensitive.
func (k *compiler) patterns(p string, src []string) []pattern {
	var out []pattern
	for j, s := range src {
		jp := fmt.Sprintf("%s[%d]", p, j)
		if s == "" {
			k.errorf(jp, "an empty pattern would match every request")
			continue
		}
		// Checked alone first, so that the message quotes the pattern as
		// written rather than with the (?i) detour puts in front.
		if _, err := regexp.Compile(s); err != nil {
			k.errorf(jp, "not a Go regular expression: %v", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
			continue
		}
		re, err := regexp.Compile("(?i)" + s)
		if err != nil {
			k.errorf(jp, "not a Go regular expression: %v", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
			continue
		}
		if re.MatchString("") {
			k.errorf(jp, "%q matches empty text, so it would match every request", s)
			continue
		}
		out = append(out, newPattern(re))
	}
	return out
}
