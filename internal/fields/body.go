package fields

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/edgeq/edgeq/internal/web"
)

// Buffer reads r's body (at most limit bytes) and puts an identical one back, so a step can look
// into it and the origin still receives it byte for byte. A larger body is 413 PAYLOAD_TOO_LARGE.
func Buffer(r *http.Request, limit int64) ([]byte, *web.Error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	_ = r.Body.Close()
	if err != nil {
		return nil, web.ErrInvalidBody.Because(err)
	}
	if int64(len(body)) > limit {
		return nil, web.ErrPayloadTooLarge
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return body, nil
}

// DecodeJSON decodes one JSON object of at most limit bytes into v, strictly: unknown fields, wrong
// types, a key given twice and data after the object are 400 INVALID_REQUEST, a larger body 413
// PAYLOAD_TOO_LARGE (the admin API takes its bodies this way). The body is consumed.
func DecodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) *web.Error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		return BodyError(err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return BodyError(err)
	}
	return checkJSON(body, dec)
}

// checkJSON refuses what a successful decode of body by dec leaves ambiguous: data after the value,
// or a key given twice in one object (encoding/json keeps the last copy, other parsers the first).
func checkJSON(body []byte, dec *json.Decoder) *web.Error {
	// Only white space may follow the value (Decoder.More alone misses a stray "}" or "]").
	if _, err := dec.Token(); err != io.EOF {
		return web.ErrInvalidJSON.Because(errors.New("data after the JSON value"))
	}
	if key, dup := duplicateKey(body); dup {
		key = Clip(key)
		return web.ErrAmbiguousField.With("field", key).Because(fmt.Errorf("JSON key %q given twice in one object", key))
	}
	return nil
}

// BodyError classifies an error reading or parsing a request body: 413 for a body over its limit,
// 400 INVALID_REQUEST otherwise.
func BodyError(err error) *web.Error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return web.ErrPayloadTooLarge
	}
	// Name the field when encoding/json does: an unknown one, or one of the wrong type.
	var wrongType *json.UnmarshalTypeError
	if errors.As(err, &wrongType) && wrongType.Field != "" {
		return web.ErrInvalidJSON.With("field", Clip(wrongType.Field)).Because(err)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if unquoted, err := strconv.Unquote(name); err == nil {
			name = unquoted
		}
		return web.ErrInvalidJSON.With("field", Clip(name)).Because(err)
	}
	return web.ErrInvalidJSON.Because(err)
}

// ParseJSON parses one JSON value the strict way the fields of a JSON body are read: numbers kept as
// json.Number, a key given twice in one object (in any letter case) or data after the value refused
// (400 INVALID_REQUEST).
func ParseJSON(body []byte) (any, *web.Error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, web.ErrInvalidJSON.Because(fmt.Errorf("malformed JSON: %w", err))
	}
	if e := checkJSON(body, dec); e != nil {
		return nil, e
	}
	return v, nil
}
