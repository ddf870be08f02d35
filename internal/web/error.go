// Package web is the HTTP plumbing edgeq's handlers share: the error type that separates what a
// visitor sees from what the log gets, JSON and HTML answers, and the per-request information
// (correlation id, client IP, logger) the proxy puts in every request's context.
package web

import (
	"fmt"
	"time"
)

// Error is an answer edgeq gives instead of the origin's. Status, Code and Message are shown to the
// client (the JSON error body, docs/reference.md "Errors"); Cause only goes to the log.
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
