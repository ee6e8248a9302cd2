package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/matryer/is"

	"github.com/svcgw/svcgw/config"
	"github.com/svcgw/svcgw/llm"
	"github.com/svcgw/svcgw/upstream/fixture"
)

// TestBuildRouter_EmbedBatch: an upstream's embed_batch reaches its
// backend, so that a server with a small batch limit (Hugging Face TEI's
// 32) is sent batches it accepts.
func TestBuildRouter_EmbedBatch(t *testing.T) {
	is := is.New(t)
	var mu sync.Mutex
	var sizes []int
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if len(req.Input) > 2 { // TEI's answer to a batch above its limit
			http.Error(w, `{"error":"batch size > max_client_batch_size","error_type":"Validation"}`, http.StatusUnprocessableEntity)
			return
		}
		mu.Lock()
		sizes = append(sizes, len(req.Input))
		mu.Unlock()
		data := make([]map[string]any, len(req.Input))
		for i := range req.Input {
			data[i] = map[string]any{"object": "embedding", "index": i, "embedding": []float32{1, 0}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": "bge",
			"usage": map[string]int{"prompt_tokens": len(req.Input), "total_tokens": len(req.Input)}})
	}))
	t.Cleanup(up.Close)

	doc := fmt.Sprintf("upstreams:\n  tei:\n    protocol: openai\n    base_url: %s/v1\n    embed_batch: 2\n    models: {bge: {}}\n"+
		"routes:\n  default: [tei/bge]\n  embedding: [tei/bge]\n", up.URL)
	cfg, err := config.Load([]byte(doc), func(string) (string, bool) { return "", false })
	is.NoErr(err)
	router, err := buildRouter(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), fixture.Options{}, nil)
	is.NoErr(err)

	req := &llm.EmbedRequest{Model: "m", Dimensions: 2}
	for i := range 5 {
		req.Inputs = append(req.Inputs, llm.EmbedInput{Text: "doc " + strconv.Itoa(i)})
	}
	e, _, err := router.Embed(context.Background(), llm.TypeEmbedding, llm.TierMedium, req)
	is.NoErr(err)
	is.Equal(len(e.Vectors), 5)
	mu.Lock()
	defer mu.Unlock()
	is.Equal(len(sizes), 3) // 2 + 2 + 1
	total := 0
	for _, n := range sizes {
		is.True(n <= 2)
		total += n
	}
	is.Equal(total, 5)
}
