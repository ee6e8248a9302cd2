// Package protocol is what the vendor protocol backends (upstream/openai,
// upstream/anthropic, upstream/gemini) share: the HTTP client and its
// connect, first-byte and idle timeouts (Client, Call), the SSE reader
// (SSEReader), the JSON frame decoder (FrameDecoder), the stream that runs
// a vendor's Decoder over an upstream body (StartStream), the stop
// sequences a protocol cannot take (Stopped, CutAtStop), and the
// translation helpers every protocol needs: gateway-issued tool-call ids,
// reasoning-signature tags, system guidance, effort levels.
//
// protocol imports upstream (Stream, HTTPOptions and the caller-safe error
// vocabulary) and llm, never a vendor's package. It is internal to
// upstream: nothing outside upstream/ can import it.
package protocol
