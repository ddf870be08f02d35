package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
)

// BufferBody reads r's body (at most limit bytes) and puts an identical one back, so a step can look
// into it and the origin still receives it byte for byte. A larger body is ErrPayloadTooLarge.
func BufferBody(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	r.Body.Close()
	if err != nil {
		return nil, ErrInvalidBody.Because(err)
	}
	if int64(len(body)) > limit {
		return nil, ErrPayloadTooLarge
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return body, nil
}

// ErrInvalidBody is a body that could not be read or parsed.
var ErrInvalidBody = &Error{Status: http.StatusBadRequest, Code: "INVALID_REQUEST", Message: "The request body could not be read."}

// FormField returns one field of a buffered form body (urlencoded or multipart); ok is false for
// bodies of other types.
func FormField(body []byte, contentType, name string) (value string, ok bool, err error) {
	mediaType, params, _ := mime.ParseMediaType(contentType)
	switch mediaType {
	case "application/x-www-form-urlencoded":
		values, err := url.ParseQuery(string(body))
		if err != nil {
			return "", true, err
		}
		return values.Get(name), true, nil
	case "multipart/form-data":
		mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				return "", true, nil
			}
			if err != nil {
				return "", true, err
			}
			if part.FormName() == name && part.FileName() == "" {
				v, err := io.ReadAll(io.LimitReader(part, 64<<10))
				return string(v), true, err
			}
		}
	}
	return "", false, nil
}

// ErrInvalidJSON is a JSON body that does not decode into what the endpoint takes.
var ErrInvalidJSON = &Error{Status: http.StatusBadRequest, Code: "INVALID_REQUEST", Message: "The JSON body is malformed, has unknown fields or wrong types."}

// DecodeJSON decodes one JSON object of at most limit bytes into v, strictly: unknown fields, wrong
// types and trailing data are 400 INVALID_REQUEST, a larger body 413 PAYLOAD_TOO_LARGE (the admin API
// takes its bodies this way).
func DecodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) *Error {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return BodyError(err)
	}
	if dec.More() {
		return ErrInvalidJSON.Because(errors.New("data after the JSON object"))
	}
	return nil
}

// BodyError classifies an error reading or parsing a request body: 413 for a body over its limit,
// 400 INVALID_REQUEST otherwise.
func BodyError(err error) *Error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return ErrPayloadTooLarge
	}
	return ErrInvalidJSON.Because(err)
}
