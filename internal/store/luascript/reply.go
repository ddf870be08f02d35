package luascript

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrReply marks a script reply of another shape than its reader expects.
var ErrReply = errors.New("unexpected script reply")

// A Reply reads a script's list reply item by item, checking types instead of asserting them; the
// first mismatch (or the call's own error) is kept: Err. Integers may come as numbers or as the
// strings a hash holds; a missing hash field (nil, "") reads as 0 or "".
type Reply struct {
	items []any
	err   error
}

// NewReply reads what Script.Run(...).Result() returned: a list, else Err.
func NewReply(v any, err error) *Reply {
	if err != nil {
		return &Reply{err: err}
	}
	items, ok := v.([]any)
	if !ok {
		return &Reply{err: fmt.Errorf("%w: %T", ErrReply, v)}
	}
	return &Reply{items: items}
}

// Failed is a reply that is only the error err.
func Failed(err error) *Reply { return &Reply{err: err} }

// Err is the call's error or the first item that did not read as asked.
func (r *Reply) Err() error { return r.err }

// Len is the number of items.
func (r *Reply) Len() int { return len(r.items) }

func (r *Reply) at(i int) any {
	if r.err != nil {
		return nil
	}
	if i >= len(r.items) {
		r.err = fmt.Errorf("%w: no item %d in %v", ErrReply, i, r.items)
		return nil
	}
	return r.items[i]
}

func (r *Reply) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrReply}, args...)...)
	}
}

// Int is item i as an integer.
func (r *Reply) Int(i int) int64 {
	switch v := r.at(i).(type) {
	case int64:
		return v
	case string:
		if v == "" {
			return 0 // a field the hash does not have
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			r.fail("item %d %q", i, v)
		}
		return n
	case nil:
		return 0
	default:
		r.fail("item %d is %T", i, v)
		return 0
	}
}

// Str is item i as a string.
func (r *Reply) Str(i int) string {
	switch v := r.at(i).(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case nil:
		return ""
	default:
		r.fail("item %d is %T", i, v)
		return ""
	}
}

// List is item i, itself a list.
func (r *Reply) List(i int) *Reply {
	v := r.at(i)
	if r.err != nil {
		return &Reply{err: r.err}
	}
	items, ok := v.([]any)
	if !ok {
		r.fail("item %d is %T, want a list", i, v)
		return &Reply{err: r.err}
	}
	return &Reply{items: items}
}

// Ints reads a reply of integers: one for a plain integer reply, each item of a list otherwise.
func Ints(v any, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	items, ok := v.([]any)
	if !ok {
		items = []any{v}
	}
	out := make([]int64, len(items))
	for i, item := range items {
		n, ok := item.(int64)
		if !ok {
			return nil, fmt.Errorf("%w: item %d is %T", ErrReply, i, item)
		}
		out[i] = n
	}
	return out, nil
}
