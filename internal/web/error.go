// Package web is the HTTP plumbing edgeq's handlers share: the error type that separates what a
// visitor sees from what the log gets, JSON and HTML answers, and the per-request information
// (correlation id, client IP, logger) the proxy puts in every request's context.
package web

import (
	"fmt"
	"net/http"
	"time"
)

// Error is an answer edgeq gives instead of the origin's. Status, Code and Message are shown to the
// client (CONTRACT error body); Cause only goes to the log.
type Error struct {
	Status     int
	Code       string
	Message    string
	Fields     map[string]any // extra JSON fields, such as wait_url
	RetryAfter time.Duration  // > 0 sets Retry-After (rounded up to whole seconds)
	Cause      error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%d %s: %s: %v", e.Status, e.Code, e.Message, e.Cause)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Cause }

// Errorf builds an Error with a formatted message.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// With returns a copy of e with an extra JSON field.
func (e *Error) With(key string, value any) *Error {
	c := *e
	c.Fields = make(map[string]any, len(e.Fields)+1)
	for k, v := range e.Fields {
		c.Fields[k] = v
	}
	c.Fields[key] = value
	return &c
}

// Because returns a copy of e with a cause for the log.
func (e *Error) Because(cause error) *Error {
	c := *e
	c.Cause = cause
	return &c
}

// Errors edgeq itself answers with. Codes of later features live next to them.
var (
	ErrNotFound          = &Error{Status: http.StatusNotFound, Code: "NOT_FOUND", Message: "There is nothing at this address."}
	ErrMethodNotAllowed  = &Error{Status: http.StatusMethodNotAllowed, Code: "METHOD_NOT_ALLOWED", Message: "This address does not accept that method."}
	ErrUnauthorized      = &Error{Status: http.StatusUnauthorized, Code: "UNAUTHORIZED", Message: "A valid admin API key is required."}
	ErrMalformedBody     = &Error{Status: http.StatusBadRequest, Code: "INVALID_REQUEST", Message: "The request body is malformed or ended early."}
	ErrPayloadTooLarge   = &Error{Status: http.StatusRequestEntityTooLarge, Code: "PAYLOAD_TOO_LARGE", Message: "The request body is too large."}
	ErrOriginUnavailable = &Error{Status: http.StatusBadGateway, Code: "ORIGIN_UNAVAILABLE", Message: "The shop is not answering right now. Please try again in a moment."}
	ErrOriginTimeout     = &Error{Status: http.StatusGatewayTimeout, Code: "ORIGIN_TIMEOUT", Message: "The shop took too long to answer. Please try again in a moment."}
	ErrInternal          = &Error{Status: http.StatusInternalServerError, Code: "INTERNAL", Message: "Something went wrong on our side."}
	ErrGateUnavailable   = &Error{Status: http.StatusServiceUnavailable, Code: "GATE_UNAVAILABLE", Message: "This page is protected by a check that is not available right now."}
)
