package policy

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// designClassifier is designExample's classifier section: English and
// Chinese word lists.
const designClassifier = `"classifier": {
    "hard_patterns": ["design|refactor|debug|architecture|why|设计|重构|调试|优化|架构|排查"],
    "easy_patterns": ["summar|translat|format|extract|rewrite|摘要|总结|翻译|格式化|提取|改写"],
    "long_input_chars": 2000, "code_blocks": 2, "files": 2, "undecided": "hard"}`

func classifierOf(t testing.TB, section string) *Classifier {
	t.Helper()
	c, err := Compile("policy.json", []byte(policyParts{top: section}.String()), testOptions())
	if err != nil {
		t.Fatalf("classifier does not compile:\n%v", err)
	}
	return c.Classifier
}

func TestClassifierClassify(t *testing.T) {
	design := classifierOf(t, designClassifier)
	fence := "```"
	for _, tc := range []struct {
		name string
		c    *Classifier
		in   TierInput
		tier string
		why  []string
	}{
		{"english hard word", design, TierInput{Text: "Please DESIGN a cache layer for this service"}, "hard", []string{`hard_pattern:"DESIGN"`}},
		{"chinese hard word", design, TierInput{Text: "请帮我重构这段代码"}, "hard", []string{`hard_pattern:"重构"`}},
		{"english easy word", design, TierInput{Text: "Summarize this article in three bullets"}, "easy", []string{`easy_pattern:"Summar"`}},
		{"chinese easy word", design, TierInput{Text: "把这段话翻译成英文"}, "easy", []string{`easy_pattern:"翻译"`}},
		{"hard and easy words: hard, both reasons", design, TierInput{Text: "Translate the logs, then debug the crash"}, "hard",
			[]string{`hard_pattern:"debug"`, `easy_pattern:"Translat"`}},
		{"no signal: undecided default", design, TierInput{Text: "hello there", InputChars: 11}, "hard", []string{"undecided"}},
		{"empty request", design, TierInput{}, "hard", []string{"undecided"}},
		{"long input", design, TierInput{Text: "hi", InputChars: 2000}, "hard", []string{"long_input:2000>=2000"}},
		{"just under long input", design, TierInput{Text: "hi", InputChars: 1999}, "hard", []string{"undecided"}},
		{"two code blocks", design, TierInput{Text: "a\n" + fence + "go\nx\n" + fence + "\nb\n" + fence + "\ny\n" + fence}, "hard", []string{"code_blocks:2>=2"}},
		{"one code block", design, TierInput{Text: "fix\n" + fence + "\nx\n" + fence}, "hard", []string{"undecided"}},
		{"unclosed fence counts as a block", design, TierInput{Text: fence + "\nx\n" + fence + "\n" + fence + "\ny"}, "hard", []string{"code_blocks:2>=2"}},
		{"files", design, TierInput{Text: "what is in these pictures", Files: 3}, "hard", []string{"files:3>=2"}},
		{"files decide over an easy word", design, TierInput{Text: "extract the totals", Files: 2}, "hard", []string{"files:2>=2", `easy_pattern:"extract"`}},
		{"every signal, in order", design, TierInput{Text: fence + "x" + fence + " 优化 then 总结 " + fence, InputChars: 9000, Files: 4}, "hard",
			[]string{"long_input:9000>=2000", "code_blocks:2>=2", "files:4>=2", `hard_pattern:"优化"`, `easy_pattern:"总结"`}},
		{"undecided tier from the policy", classifierOf(t, `"classifier": {"undecided": "medium"}`), TierInput{Text: "hi"}, "medium", []string{"undecided"}},
		{"thresholds from the policy", classifierOf(t, `"classifier": {"long_input_chars": 10, "code_blocks": 1, "files": 1}`),
			TierInput{Text: fence + "x", InputChars: 10, Files: 1}, "hard", []string{"long_input:10>=10", "code_blocks:1>=1", "files:1>=1"}},
		{"first pattern that matches wins", classifierOf(t, `"classifier": {"hard_patterns": ["zebra", "b+", "a"]}`),
			TierInput{Text: "a bbb a"}, "hard", []string{`hard_pattern:"[1]"`}},
		{"a free-form pattern logs its index, never the prompt", classifierOf(t, `"classifier": {"hard_patterns": ["设+"]}`),
			TierInput{Text: strings.Repeat("设", 50)}, "hard", []string{`hard_pattern:"[0]"`}},
		{"a word list logs the word", classifierOf(t, `"classifier": {"hard_patterns": ["zebra|Refactor"]}`),
			TierInput{Text: "please REFACTOR it"}, "hard", []string{`hard_pattern:"REFACTOR"`}},
		{"matched text is quoted for the log", classifierOf(t, `"classifier": {"easy_patterns": ["a\\sb"]}`),
			TierInput{Text: "xa\nb"}, "easy", []string{`easy_pattern:"a\nb"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tier, why := tc.c.Classify(tc.in)
			if tier != tc.tier || strings.Join(why, " | ") != strings.Join(tc.why, " | ") {
				t.Errorf("Classify = %q %q; want %q %q", tier, why, tc.tier, tc.why)
			}
		})
	}
}

func TestCodeBlocks(t *testing.T) {
	for _, tc := range []struct {
		text string
		want int
	}{
		{"", 0}, {"``", 0}, {"`x`", 0}, {"```", 1}, {"```go\nx\n```", 1},
		{"```a``` ```b```", 2}, {"```a```\n```b", 2},
		// A run of more than three backticks is one fence.
		{"````\nx\n````", 1}, {"``````", 1},
	} {
		if got := codeBlocks(tc.text); got != tc.want {
			t.Errorf("codeBlocks(%q) = %d; want %d", tc.text, got, tc.want)
		}
	}
}

func TestClassifierErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		section string
		want    []fieldErr
	}{
		{"bad regexps", `"classifier": {"hard_patterns": ["ok", "(unclosed"], "easy_patterns": ["[z-a]"]}`, []fieldErr{
			{"classifier.hard_patterns[1]", "not a Go regular expression: missing closing ): `(unclosed`"},
			{"classifier.easy_patterns[0]", "not a Go regular expression: invalid character class range: `z-a`"},
		}},
		{"patterns that match every request", `"classifier": {"hard_patterns": [""], "easy_patterns": ["x*", "ok"]}`, []fieldErr{
			{"classifier.hard_patterns[0]", "an empty pattern would match every request"},
			{"classifier.easy_patterns[0]", `"x*" matches empty text, so it would match every request`},
		}},
		{"thresholds", `"classifier": {"long_input_chars": -1, "code_blocks": -2, "files": -3}`, []fieldErr{
			{"classifier.long_input_chars", "must be at least 1 (0 or absent: the default, 2000); got -1"},
			{"classifier.code_blocks", "must be at least 1 (0 or absent: the default, 2); got -2"},
			{"classifier.files", "must be at least 1 (0 or absent: the default, 2); got -3"},
		}},
		{"patterns are strings", `"classifier": {"hard_patterns": "design"}`, []fieldErr{
			{"classifier.hard_patterns", `expected an array, got "design"`},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrs(t, compileErrs(t, policyParts{top: tc.section}), tc.want)
		})
	}
}

func TestClassifierZeroThresholdsAreDefaults(t *testing.T) {
	c := classifierOf(t, `"classifier": {"long_input_chars": 0, "code_blocks": 0, "files": 0}`)
	if c.LongInputChars != DefaultLongInputChars || c.CodeBlocks != DefaultCodeBlocks || c.Files != DefaultFiles {
		t.Errorf("thresholds = %d %d %d; want the defaults", c.LongInputChars, c.CodeBlocks, c.Files)
	}
}

func FuzzTierClassify(f *testing.F) {
	c := classifierOf(f, `"classifier": {
    "hard_patterns": ["design|refactor|debug|architecture|why|设计|重构|调试|优化|架构|排查", "\\bwhy\\b"],
    "easy_patterns": ["summar|translat|format|extract|rewrite|摘要|总结|翻译|格式化|提取|改写"],
    "undecided": "medium"}`)
	f.Add("Please refactor this", 20, 0)
	f.Add("请帮我总结", 5, 0)
	f.Add("```go\nx\n```\n```", 3000, 3)
	f.Add("\xff\xfe设", -1, -1)
	f.Fuzz(func(t *testing.T, text string, inputChars, files int) {
		tier, reasons := c.Classify(TierInput{Text: text, InputChars: inputChars, Files: files})
		if tier != TierHard && tier != TierEasy && tier != "medium" {
			t.Fatalf("tier %q", tier)
		}
		if len(reasons) == 0 {
			t.Fatal("no reasons")
		}
		hard := false
		for _, r := range reasons {
			name, arg, _ := strings.Cut(r, ":")
			switch name {
			case "long_input", "code_blocks", "files":
				hard = true
			case "hard_pattern", "easy_pattern":
				hard = hard || name == "hard_pattern"
				s, err := strconv.Unquote(arg)
				if err != nil || utf8.RuneCountInString(s) > reasonTextMax {
					t.Fatalf("reason %q: matched text not quoted or too long", r)
				}
			case "undecided":
				if len(reasons) != 1 || tier != "medium" {
					t.Fatalf("undecided with %q, tier %q", reasons, tier)
				}
			default:
				t.Fatalf("unknown reason %q", r)
			}
		}
		if hard != (tier == TierHard) {
			t.Fatalf("tier %q with reasons %q", tier, reasons)
		}
	})
}

// patternCases are patterns the fast path takes (word lists, classes,
// optional parts, Unicode with other cases) and some it must leave to the
// regexp (repetition, assertions, case-sensitive letters).
var patternCases = []string{
	"design|refactor|debug|architecture|why|设计|重构|调试|优化|架构|排查",
	"summar|translat|format|extract|rewrite|摘要|总结|翻译|格式化|提取|改写",
	"a|ab|abc", "ab|a", "colou?r", "gr[ae]y", "(?:re)?(?:write|factor)", "k", "straße", "σ", "ǅ",
	"(?-i:Kelvin)", "(?-i:中文)", `\bwhy\b`, "deb+ug", "^hi", "[a-z]{2}", ".x",
}

func TestPatternFastPath(t *testing.T) {
	takes := map[string]bool{}
	for _, src := range patternCases {
		takes[src] = newPattern(regexp.MustCompile("(?i)"+src)).lits != nil
	}
	for src, want := range map[string]bool{
		patternCases[0]: true, "colou?r": true, "gr[ae]y": true, "σ": true, "(?-i:中文)": true,
		"(?-i:Kelvin)": false, `\bwhy\b`: false, "deb+ug": false, "^hi": false, ".x": false,
	} {
		if takes[src] != want {
			t.Errorf("fast path for %q: %v; want %v", src, takes[src], want)
		}
	}
	texts := []string{
		"", "Please REFACTOR and Debug", "ABC ab a", "grAy colour", "STRASSE straße STRAßE", "Σς σ",
		"\u212Aelvin kelvin KELVIN", "请帮我重构", "\xff\xfe设计", "ǅǄǆ", "rewritefactor",
	}
	for _, src := range patternCases {
		p := newPattern(regexp.MustCompile("(?i)" + src))
		for _, text := range texts {
			if got, want := findLoc(&p, text), p.re.FindStringIndex(text); !slices.Equal(got, want) {
				t.Errorf("pattern %q in %q: find = %v; regexp = %v", src, text, got, want)
			}
		}
	}
}

// findLoc is pattern.find in FindStringIndex's form.
func findLoc(p *pattern, text string) []int {
	if start, end, ok := p.find(text); ok {
		return []int{start, end}
	}
	return nil
}

// FuzzPatternFastPath checks that the literal-set scan finds exactly what
// the regexp finds, for any pattern and text.
func FuzzPatternFastPath(f *testing.F) {
	for i, src := range patternCases {
		f.Add(src, []string{"Please refactor", "STRAßE", "请帮我总结", "\u212A", "colour gray"}[i%5])
	}
	f.Fuzz(func(t *testing.T, src, text string) {
		re, err := regexp.Compile("(?i)" + src)
		if err != nil {
			return
		}
		p := newPattern(re)
		if got, want := findLoc(&p, text), re.FindStringIndex(text); !slices.Equal(got, want) {
			t.Fatalf("pattern %q in %q: find = %v; regexp = %v (fast path %v)", src, text, got, want, p.lits != nil)
		}
	})
}

func TestFoldRuneCJKHasNoCase(t *testing.T) {
	for r := rune(0x3400); r <= 0x9FFF; r++ {
		if unicode.SimpleFold(r) != r {
			t.Fatalf("%U has another case; foldRune's CJK shortcut is wrong", r)
		}
	}
}

func BenchmarkTierClassify(b *testing.B) {
	c := classifierOf(b, designClassifier)
	short := TierInput{Text: "Can you help me write a short poem about the sea for my daughter's birthday card?", InputChars: 400}
	hardWord := TierInput{Text: "We keep hitting timeouts in the payment service; please debug the retry loop below.", InputChars: 900}
	long := TierInput{
		Text:       strings.Repeat("Here is a paragraph of ordinary text from a long document that the user pasted. ", 100),
		InputChars: 8100,
	}
	code := TierInput{
		Text:       "Why does this fail?\n```go\nfunc main() {\n\tpanic(1)\n}\n```\nand\n```\nexit status 2\n```",
		InputChars: 120,
	}
	for _, bc := range []struct {
		name string
		in   TierInput
	}{{"undecided", short}, {"hard_word", hardWord}, {"long_8KB", long}, {"code_blocks", code}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.in.Text)))
			for b.Loop() {
				c.Classify(bc.in)
			}
		})
	}
}
