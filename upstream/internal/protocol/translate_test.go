package protocol

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/matryer/is"
)

func TestTranslate_Helpers(t *testing.T) {
	is := is.New(t)
	is.Equal(string(ArgsObject(nil)), `{}`)
	is.Equal(string(ArgsObject(json.RawMessage(` { "a" : 1 } `))), `{"a":1}`)
	is.Equal(string(ArgsObject(json.RawMessage(`[1]`))), `{"_raw":"[1]"}`)
	sig, ok := UntagSig(SigThought, TagSig(SigThought, "abc"))
	is.True(ok)
	is.Equal(sig, "abc")
	_, ok = UntagSig(SigThinking, TagSig(SigThought, "abc"))
	is.True(!ok) // another protocol's signature
	_, ok = UntagSig(SigThinking, SigThinking)
	is.True(!ok) // a tag without a signature
	id := NewCallID()
	is.True(strings.HasPrefix(id, "call_") && len(id) == 29)
}
