package server

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/matryer/is"
)

// TestModels_OneCreationDateOnEverySurface checks that the OpenAI-shaped
// and Anthropic-shaped model lists date the model ids alike, and not at
// the Unix epoch (an SDK user sorting by date would see 1970).
func TestModels_OneCreationDateOnEverySurface(t *testing.T) {
	is := is.New(t)
	gw := newTestGateway(t)

	resp, body := gw.do(t, http.MethodGet, "/svc/v1/models", "")
	is.Equal(resp.StatusCode, http.StatusOK)
	var openai struct {
		Data []struct {
			ID      string `json:"id"`
			Created int64  `json:"created"`
		} `json:"data"`
	}
	is.NoErr(json.Unmarshal(body, &openai))

	resp, body = gw.do(t, http.MethodGet, "/svc/v1/models", "", "Anthropic-Version", "2023-06-01")
	is.Equal(resp.StatusCode, http.StatusOK)
	var anthropic struct {
		Data []struct {
			ID        string `json:"id"`
			CreatedAt string `json:"created_at"`
		} `json:"data"`
	}
	is.NoErr(json.Unmarshal(body, &anthropic))

	is.Equal(len(openai.Data), len(anthropic.Data))
	for i, m := range anthropic.Data {
		at, err := time.Parse(time.RFC3339, m.CreatedAt)
		is.NoErr(err)                                                  // RFC 3339
		is.True(at.After(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))) // not the epoch
		is.Equal(m.ID, openai.Data[i].ID)
		is.Equal(at.Unix(), openai.Data[i].Created) // the same date on both surfaces
	}
}
