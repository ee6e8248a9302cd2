package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
)

// FrameDecoder decodes the JSON frames of one stream, one after another.
//
// json.Unmarshal builds its decoder state afresh on every call (the
// scanner's stack, the field path kept for error messages, the state
// itself), which for a stream of small frames is most of what decoding one
// allocates. A json.Decoder keeps that state between values, so one per
// stream, fed each frame through a reset bytes.Reader, decodes a frame
// allocating only what lands in the destination. It accepts exactly what
// json.Unmarshal accepts.
type FrameDecoder struct {
	src bytes.Reader
	dec *json.Decoder
}

// errTrailingData is reported for a frame with more after its JSON value,
// which json.Unmarshal refuses too.
var errTrailingData = errors.New("invalid character after top-level value")

// Decode decodes data, one JSON value with optional surrounding white
// space, into v.
func (d *FrameDecoder) Decode(data []byte, v any) error {
	data = bytes.TrimSpace(data)
	if d.dec == nil {
		d.dec = json.NewDecoder(&d.src)
	}
	d.src.Reset(data)
	start := d.dec.InputOffset()
	err := d.dec.Decode(v)
	if err == nil && d.dec.InputOffset()-start != int64(len(data)) {
		err = errTrailingData
	}
	if err != nil {
		// A json.Decoder keeps read errors, and after trailing data its
		// buffer holds the rest: the next frame starts afresh.
		d.dec = nil
	}
	return err
}
