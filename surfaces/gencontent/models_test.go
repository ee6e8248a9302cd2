package gencontent

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/surfaces/surface"
)

func TestWriteModels(t *testing.T) {
	is := is.New(t)
	rec := httptest.NewRecorder()
	Codec{}.WriteModels(rec, surface.Limits{ContextLength: 1048576, MaxCompletionTokens: 65536})
	is.Equal(rec.Code, 200)
	goldenJSON(t, "models.json", rec.Body.Bytes())

	var raw map[string]json.RawMessage
	is.NoErr(json.Unmarshal(rec.Body.Bytes(), &raw))
	_, hasToken := raw["nextPageToken"]
	is.True(!hasToken) // js-genai pages forever on any token, even ""
}

func TestWriteModel(t *testing.T) {
	tests := []struct {
		name, id, wantName string
		status             int
	}{
		{"listed id", "svc-max", "models/svc-max", 200},
		{"any id resolves", "gemini-2.5-flash", "models/gemini-2.5-flash", 200},
		{"models/ prefix", "models/custom-x", "models/custom-x", 200},
		{"empty id", "", "", 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			rec := httptest.NewRecorder()
			Codec{}.WriteModel(rec, tt.id, surface.Limits{ContextLength: 200000, MaxCompletionTokens: 8192})
			is.Equal(rec.Code, tt.status)
			if tt.status != 200 {
				return
			}
			var m model
			is.NoErr(json.Unmarshal(rec.Body.Bytes(), &m))
			is.Equal(m.Name, tt.wantName)
			is.Equal(m.InputTokenLimit, 200000)
			is.Equal(m.OutputTokenLimit, 8192)
			is.Equal(m.SupportedGenerationMethods, []string{"generateContent", "streamGenerateContent", "countTokens"})
		})
	}
}
