package llm

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/matryer/is"
)

// Samples of each kind of text TextTokens must not under-estimate.
var (
	proseSample = `It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness, ` +
		`it was the epoch of belief, it was the epoch of incredulity, it was the season of Light, it was the season of Darkness. ` +
		`Please summarise the attached quarterly report for the board, highlighting revenue growth, operating margins, ` +
		`customer churn and any risks the auditors mentioned; keep it under two hundred words and avoid jargon.`
	codeSample = "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\n" +
		"func main() {\n\tif len(os.Args) < 2 {\n\t\tfmt.Fprintln(os.Stderr, \"usage: greet NAME\")\n\t\tos.Exit(2)\n\t}\n" +
		"\tfor i, name := range os.Args[1:] {\n\t\tfmt.Printf(\"%d: hello, %s!\\n\", i+1, name)\n\t}\n}\n" +
		"def fib(n: int) -> int:\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n"
	jsonSample = `{"id":"evt_8f2a","type":"order.created","amount":12999,"currency":"usd","items":[{"sku":"A-100","qty":2},` +
		`{"sku":"B-205","qty":1}],"customer":{"id":42,"email":"ada@example.com"},"paid":true,"ts":"2026-05-01T12:00:00Z"}`
	chineseSample  = "人工智能正在改变我们的工作方式。许多公司使用大型语言模型来回答客户的问题、编写代码和总结文件。但是，成本和隐私仍然是重要的问题。"
	japaneseSample = "東京は日本の首都です。ひらがなとカタカナと漢字を使って文章を書きます。明日は雨が降るでしょう。"
	koreanSample   = "안녕하세요. 저는 서울에 살고 있습니다. 오늘 날씨가 정말 좋네요. 내일 만나서 이야기합시다."
	emojiSample    = "🚀🎉🔥😀👍🏽🇫🇷🧑‍💻❤️🙈🌍"
	russianSample  = "Искусственный интеллект меняет то, как мы работаем: компании используют языковые модели, чтобы отвечать клиентам."
)

// The published figures TextTokens is held to (see its doc comment), as
// the fewest characters per token (or the most tokens per character) any
// of the common tokenizers gives for each kind of text.
func TestTextTokens_NeverUnderEstimatesByMoreThanAQuarter(t *testing.T) {
	const factor = 1.25
	emoji := utf8.RuneCountInString(emojiSample) // code points: each part of a sequence
	tests := []struct {
		name string
		text string
		want float64 // tokens by the published figure
	}{
		{"English prose at 3.5 characters a token (Claude)", proseSample, float64(len(proseSample)) / 3.5},
		{"code at 3 characters a token", codeSample, float64(len(codeSample)) / 3},
		{"JSON at 2.5 characters a token", jsonSample, float64(len(jsonSample)) / 2.5},
		{"Chinese at 1 token a character", chineseSample, float64(utf8.RuneCountInString(chineseSample))},
		{"Japanese at 1 token a character", japaneseSample, float64(utf8.RuneCountInString(japaneseSample))},
		{"Korean at 1 token a character", koreanSample, float64(utf8.RuneCountInString(koreanSample))},
		{"emoji at 3 tokens each", emojiSample, 3 * float64(emoji)},
		{"Cyrillic at 2.5 characters a token", russianSample, float64(utf8.RuneCountInString(russianSample)) / 2.5},
		// The case: 30,000 CJK characters were 7,504 tokens.
		{"30,000 CJK characters", strings.Repeat("漢", 30000), 30000},
		{"30,000 emoji", strings.Repeat("😀", 30000), 90000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TextTokens(tt.text)
			t.Logf("%d tokens for %d bytes, %d characters (published figure %.0f)", got, len(tt.text), utf8.RuneCountInString(tt.text), tt.want)
			if float64(got)*factor < tt.want {
				t.Errorf("TextTokens = %d, under %.0f by more than %.2f×", got, tt.want, factor)
			}
			if float64(got) > 2.5*tt.want {
				t.Errorf("TextTokens = %d: over %.0f by more than 2.5×, a useless estimate", got, tt.want)
			}
		})
	}
}

// Short texts whose cl100k_base tokenization is well known.
func TestTextTokens_KnownTokenizations(t *testing.T) {
	for _, tt := range []struct {
		text string
		want int // cl100k_base
	}{
		{"Hello, world!", 4}, // Hello | , | ␣world | !
		{"The quick brown fox jumps over the lazy dog.", 10}, // one token a word, and the period
	} {
		if got := TextTokens(tt.text); got < tt.want {
			t.Errorf("TextTokens(%q) = %d, under %d", tt.text, got, tt.want)
		}
	}
}

func TestTextTokens_Basics(t *testing.T) {
	is := is.New(t)
	is.Equal(TextTokens(""), 0)
	is.Equal(TextTokens("a"), 1)    // non-empty text is at least one token
	is.Equal(TextTokens(" "), 0)    // a lone space joins the next run
	is.Equal(TextTokens("\xff"), 1) // not UTF-8: a byte a token
	// Monotone: a longer text is never fewer tokens.
	for _, s := range []string{proseSample, codeSample, chineseSample, emojiSample} {
		prev := 0
		for i := range s {
			n := TextTokens(s[:i])
			is.True(n >= prev)
			prev = n
		}
	}
}

func TestTruncateTokens(t *testing.T) {
	is := is.New(t)
	for _, s := range []string{proseSample, codeSample, chineseSample, emojiSample, ""} {
		for _, n := range []int{0, 1, 2, 5, 17, 1000} {
			got := TruncateTokens(s, n)
			is.True(strings.HasPrefix(s, got))
			is.True(utf8.ValidString(got)) // cut between characters
			is.True(TextTokens(got) <= n)  // within the budget
			if got != s {                  // and the longest such prefix
				_, size := utf8.DecodeRuneInString(s[len(got):])
				is.True(TextTokens(s[:len(got)+size]) > n)
			}
		}
	}
}

func TestTextTokens_NoAllocations(t *testing.T) {
	text := proseSample + codeSample + chineseSample + emojiSample + "\xff"
	if n := testing.AllocsPerRun(100, func() { _ = TextTokens(text) }); n != 0 {
		t.Fatalf("TextTokens allocates %v times", n)
	}
}

// BenchmarkTextTokens measures the estimate on each kind of text, beside
// what it replaced (a rune count, divided by four) on the same text.
func BenchmarkTextTokens(b *testing.B) {
	for _, bc := range []struct{ name, text string }{
		{"prose", strings.Repeat(proseSample, 64)},
		{"code", strings.Repeat(codeSample, 64)},
		{"cjk", strings.Repeat(chineseSample, 64)},
		{"emoji", strings.Repeat(emojiSample, 256)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.text)))
			b.ReportAllocs()
			for b.Loop() {
				_ = TextTokens(bc.text)
			}
		})
		b.Run(bc.name+"/runecount-baseline", func(b *testing.B) {
			b.SetBytes(int64(len(bc.text)))
			b.ReportAllocs()
			for b.Loop() {
				_ = (utf8.RuneCountInString(bc.text) + 3) / 4
			}
		})
	}
}
