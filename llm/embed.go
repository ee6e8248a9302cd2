package llm

// EmbedRequest is one embeddings call, whichever surface it came in on: a
// batch of inputs, each turned into one vector. A batch is one call, one
// reservation and one generation record.
type EmbedRequest struct {
	// Model is the caller's model id: intent only, echoed back unchanged.
	Model string
	// Inputs are embedded in order; the reply's vectors have the same
	// order and count.
	Inputs []EmbedInput
	// Dimensions is the length asked for each vector (OpenAI's
	// dimensions, Gemini's outputDimensionality); 0 means the model's
	// default.
	Dimensions int
	// DefaultDimensions is the length of each vector when Dimensions is 0
	// and the backend has no model default of its own (the fixture): the
	// usual default of the caller's surface (1,536 on OpenAI's, 768 on
	// Gemini's). It is never sent upstream.
	DefaultDimensions int
	// TaskType and Title are Gemini's hints (RETRIEVAL_DOCUMENT, …, and
	// the document's title); a backend whose protocol has no such field
	// ignores them.
	TaskType string
	Title    string
	// Account scopes what backends share between calls (as
	// Request.Account): the router spreads an account's calls among equal
	// candidates by it.
	Account string
	// User is the caller's end-user id (OpenAI's user), if it sent one.
	User string
	// InputTokens is svcgw's own count of the inputs, set by the server
	// once the call is decoded: what is reserved and rate-limited.
	InputTokens int
	// Wire is the form the caller's reply writes its vectors in (set by
	// the server from the surface's reply). A backend whose upstream
	// answers in that form passes the vectors' text through
	// (Embeddings.Text); an OpenAI-protocol backend asks for it
	// (encoding_format).
	Wire EmbedWire
}

// EmbedInput is one input: text, or a sequence of token ids (OpenAI's
// pre-tokenised input), never both.
type EmbedInput struct {
	Text   string
	Tokens []int
}

// Embeddings is an embeddings call's reply: one vector per input, in the
// inputs' order, as float32 (what every vendor returns; a surface that was
// asked for base64 encodes them itself).
type Embeddings struct {
	Vectors [][]float32
	// Text, when not nil, holds the vectors instead of Vectors, as the
	// upstream wrote them in the caller's form Wire (the request's): a
	// JSON array of numbers without white space, or base64 text without
	// its quotes. The backend checked it (Float32ArrayText,
	// CheckBase64Vector): Dims well-formed numbers each, all finite as
	// float32. Floats turns it into Vectors.
	Text [][]byte
	Wire EmbedWire
	Dims int
	// Usage counts the input tokens the upstream billed (OutputTokens is
	// always 0); zero when the upstream did not say, and the server then
	// charges its own count.
	Usage Usage
}

// TokenCount is svcgw's count of in: its token ids, or its text by the
// estimator generation uses (TextTokens).
func (in EmbedInput) TokenCount() int {
	if in.Tokens != nil {
		return len(in.Tokens)
	}
	return TextTokens(in.Text)
}

// CountInputTokens is svcgw's count of every input of r, and of its
// title, which a backend that takes one embeds with each input: what the
// call is reserved, rate-limited and, when the upstream reports no usage,
// charged on.
func (r *EmbedRequest) CountInputTokens() int {
	n := 0
	title := 0
	if r.Title != "" {
		title = TextTokens(r.Title)
	}
	for _, in := range r.Inputs {
		n += in.TokenCount() + title
	}
	return n
}
