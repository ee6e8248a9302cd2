package gemini

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/matryer/is"
)

// Sums of reported counts saturate instead of wrapping around to a small
// or negative number, which no later bound could tell from a real one.
func TestCanonicalUsage_sumsSaturate(t *testing.T) {
	is := is.New(t)
	var gm gmUsage
	is.NoErr(json.Unmarshal([]byte(`{"promptTokenCount":9000000000000000000,"toolUsePromptTokenCount":9000000000000000000,
		"candidatesTokenCount":9000000000000000000,"thoughtsTokenCount":9000000000000000000}`), &gm))
	u := gm.canonical()
	is.Equal(u.InputTokens, math.MaxInt)  // prompt + tool-use prompt saturate
	is.Equal(u.OutputTokens, math.MaxInt) // candidates + thoughts saturate
}
