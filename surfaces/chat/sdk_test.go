package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/svcgw/svcgw/llm"
)

// These tests read what the encoders write with the official Go SDK's own
// types, stream decoder and accumulator, without a server: if the SDK
// rejects a frame, it fails here first.

func sseResponse(b []byte) *http.Response {
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": []string{"text/event-stream"}},
		Body:       io.NopCloser(bytes.NewReader(b)),
	}
}

func TestStream_SDKAccumulator(t *testing.T) {
	is := is.New(t)
	req := &llm.Request{Model: "svc-fusion", Stream: true, IncludeUsage: true}
	wire := runStream(t, Codec{}.NewStream(req, "chatcmpl-sdk", goldenCreated), completeEvents, nil)

	st := ssestream.NewStream[openai.ChatCompletionChunk](ssestream.NewDecoder(sseResponse(wire)), nil)
	var acc openai.ChatCompletionAccumulator
	var reasoning string
	var finishedCalls []openai.FinishedChatCompletionToolCall
	for st.Next() {
		chunk := st.Current()
		is.True(acc.AddChunk(chunk)) // the accumulator takes every chunk
		if len(chunk.Choices) > 0 {
			if f, ok := chunk.Choices[0].Delta.JSON.ExtraFields["reasoning"]; ok {
				var s string
				is.NoErr(json.Unmarshal([]byte(f.Raw()), &s)) // delta.reasoning is a string
				reasoning += s
			}
		}
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finishedCalls = append(finishedCalls, tc)
		}
	}
	is.NoErr(st.Err()) // stream ends cleanly at [DONE]

	is.Equal(acc.ID, "chatcmpl-sdk")
	is.Equal(acc.Model, "svc-fusion")
	is.Equal(len(acc.Choices), 1)
	msg := acc.Choices[0].Message
	is.Equal(msg.Content, "Let me check.")
	is.Equal(reasoning, "The user wants the weather.")
	is.Equal(acc.Choices[0].FinishReason, "tool_calls")
	is.Equal(len(msg.ToolCalls), 1)
	is.Equal(msg.ToolCalls[0].ID, "call_7Qx")
	is.Equal(msg.ToolCalls[0].Function.Name, "get_weather")
	is.Equal(msg.ToolCalls[0].Function.Arguments, `{"city":"Paris"}`)
	is.Equal(acc.Usage.PromptTokens, int64(81))
	is.Equal(acc.Usage.CompletionTokens, int64(18))
	is.Equal(acc.Usage.TotalTokens, int64(99))
	is.Equal(acc.Usage.PromptTokensDetails.CachedTokens, int64(64))
	is.Equal(acc.Usage.CompletionTokensDetails.ReasoningTokens, int64(5))
}

func TestStream_SDKError(t *testing.T) {
	is := is.New(t)
	req := &llm.Request{Model: "m", Stream: true}
	wire := runStream(t, Codec{}.NewStream(req, "chatcmpl-sdk", goldenCreated), partialEvents, overloaded)
	st := ssestream.NewStream[openai.ChatCompletionChunk](ssestream.NewDecoder(sseResponse(wire)), nil)
	var content string
	for st.Next() {
		if c := st.Current(); len(c.Choices) > 0 {
			content += c.Choices[0].Delta.Content
		}
	}
	is.Equal(content, "Partial answer") // deltas before the error arrive
	var se *ssestream.StreamError
	is.True(errors.As(st.Err(), &se)) // the error frame ends the stream with a StreamError
}

func TestWriteResponse_SDK(t *testing.T) {
	is := is.New(t)
	rec := httptest.NewRecorder()
	is.NoErr(Codec{}.WriteResponse(rec, &llm.Request{Model: "svc-fusion"}, goldenResponse("chatcmpl-sdk")))
	var c openai.ChatCompletion
	is.NoErr(json.Unmarshal(rec.Body.Bytes(), &c))
	is.Equal(c.ID, "chatcmpl-sdk")
	is.Equal(c.Created, goldenCreated.Unix())
	is.Equal(c.Choices[0].Message.Content, "Let me check.")
	is.Equal(c.Choices[0].FinishReason, "tool_calls")
	is.Equal(c.Choices[0].Message.ToolCalls[0].Function.Arguments, `{"city":"Paris"}`)
	is.Equal(c.Usage.PromptTokensDetails.CachedTokens, int64(64))
	is.Equal(c.Choices[0].Message.JSON.ExtraFields["reasoning"].Raw(), `"The user wants the weather."`)
	_, hasRC := c.Choices[0].Message.JSON.ExtraFields["reasoning_content"]
	is.True(!hasRC) // reasoning_content never appears
}

func TestResponsesWriteResponse_SDK(t *testing.T) {
	is := is.New(t)
	rec := httptest.NewRecorder()
	req := &llm.Request{Model: "svc-fusion"}
	is.NoErr(ResponsesCodec{}.WriteResponse(rec, req, goldenResponse("resp_sdk")))
	var r responses.Response
	is.NoErr(json.Unmarshal(rec.Body.Bytes(), &r))
	is.Equal(r.ID, "resp_sdk")
	is.Equal(string(r.Status), "completed")
	is.Equal(r.OutputText(), "Let me check.")
	is.Equal(len(r.Output), 3)
	is.Equal(r.Output[0].Type, "reasoning")
	is.Equal(r.Output[0].EncryptedContent, "sig-opaque")
	fc := r.Output[2].AsFunctionCall()
	is.Equal(fc.CallID, "call_7Qx")
	is.Equal(fc.Arguments, `{"city":"Paris"}`)
	is.Equal(r.Usage.InputTokens, int64(81))
	is.Equal(r.Usage.OutputTokensDetails.ReasoningTokens, int64(5))
}

func TestResponsesStream_SDK(t *testing.T) {
	is := is.New(t)
	req := &llm.Request{Model: "svc-fusion", Stream: true, IncludeUsage: true}
	enc := ResponsesCodec{}.newStream(req, "resp_sdk", goldenCreated)
	enc.now = func() time.Time { return goldenCreated }
	wire := runStream(t, enc, completeEvents, nil)

	st := ssestream.NewStream[responses.ResponseStreamEventUnion](ssestream.NewDecoder(sseResponse(wire)), nil)
	var types []string
	var text, args, summary string
	var final responses.Response
	for st.Next() {
		ev := st.Current()
		types = append(types, ev.Type)
		switch e := ev.AsAny().(type) {
		case responses.ResponseTextDeltaEvent:
			text += e.Delta
		case responses.ResponseFunctionCallArgumentsDeltaEvent:
			args += e.Delta
		case responses.ResponseReasoningSummaryTextDeltaEvent:
			summary += e.Delta
		case responses.ResponseCompletedEvent:
			final = e.Response
		}
	}
	is.NoErr(st.Err())
	is.Equal(types[0], "response.created")
	is.Equal(types[len(types)-1], "response.completed")
	is.Equal(text, "Let me check.")
	is.Equal(args, `{"city":"Paris"}`)
	is.Equal(summary, "The user wants the weather.")
	is.Equal(final.OutputText(), "Let me check.")
	is.Equal(final.Usage.TotalTokens, int64(99))
	is.Equal(final.Output[2].AsFunctionCall().Arguments, `{"city":"Paris"}`)
}

func TestResponsesStream_SDKError(t *testing.T) {
	is := is.New(t)
	req := &llm.Request{Model: "m", Stream: true, IncludeUsage: true}
	wire := runStream(t, ResponsesCodec{}.newStream(req, "resp_sdk", goldenCreated), partialEvents, overloaded)
	st := ssestream.NewStream[responses.ResponseStreamEventUnion](ssestream.NewDecoder(sseResponse(wire)), nil)
	for st.Next() {
	}
	var se *ssestream.StreamError
	is.True(errors.As(st.Err(), &se)) // the SDK raises on the error event
}

func TestResponsesCodec_CountTokens(t *testing.T) {
	is := is.New(t)
	rec := httptest.NewRecorder()
	body := []byte(`{"model":"svc-fusion","instructions":"be brief","input":"Say hello."}`)
	ResponsesCodec{}.CountTokens(rec, httptest.NewRequest(http.MethodPost, "/v1/responses/input_tokens", nil), body)
	is.Equal(rec.Code, http.StatusOK)
	var got struct {
		Object      string `json:"object"`
		InputTokens int    `json:"input_tokens"`
	}
	is.NoErr(json.Unmarshal(rec.Body.Bytes(), &got))
	is.Equal(got.Object, "response.input_tokens")
	req, err := decodeResponses(context.Background(), nil, nil, body)
	is.NoErr(err)
	is.Equal(got.InputTokens, req.InputTokens()) // the same estimate the pipeline uses

	rec = httptest.NewRecorder()
	ResponsesCodec{}.CountTokens(rec, httptest.NewRequest(http.MethodPost, "/v1/responses/input_tokens", nil), []byte(`{"model":"m"}`))
	is.Equal(rec.Code, http.StatusBadRequest) // a body the decoder refuses is a 400
}
