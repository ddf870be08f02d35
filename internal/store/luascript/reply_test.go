package luascript

import (
	"errors"
	"testing"
)

// A reply reads as its items are: integers as numbers or the strings a hash holds, a missing hash
// field as zero, nested lists; the first item of another shape is the reply's error and no later read
// replaces it.
func TestReply_ReadsItemsAndKeepsTheFirstMismatch(t *testing.T) {
	r := NewReply([]any{int64(7), "42", nil, "", []any{"a", int64(3)}, "x"}, nil)
	if r.Int(0) != 7 || r.Int(1) != 42 || r.Int(2) != 0 || r.Int(3) != 0 || r.Str(0) != "7" || r.Str(2) != "" || r.Len() != 6 {
		t.Fatalf("items read wrong: %d %d %d %d %q %q %d", r.Int(0), r.Int(1), r.Int(2), r.Int(3), r.Str(0), r.Str(2), r.Len())
	}
	if l := r.List(4); l.Str(0) != "a" || l.Int(1) != 3 || l.Err() != nil {
		t.Fatalf("nested list: %q %d %v", l.Str(0), l.Int(1), l.Err())
	}
	if r.Err() != nil {
		t.Fatalf("no mismatch yet, Err = %v", r.Err())
	}
	if r.Int(5) != 0 || !errors.Is(r.Err(), ErrReply) {
		t.Fatalf("a non-number read as an integer: Err = %v", r.Err())
	}
	first := r.Err()
	r.List(0)
	r.Int(99)
	if r.Err() != first {
		t.Fatalf("the first mismatch was replaced: %v, then %v", first, r.Err())
	}
	if !errors.Is(NewReply(int64(1), nil).Err(), ErrReply) {
		t.Fatal("a plain integer is not a list reply")
	}
	cause := errors.New("connection refused")
	if r := NewReply(nil, cause); r.Err() != cause || r.Int(0) != 0 {
		t.Fatalf("the call's error: %v", r.Err())
	}
}

func TestInts_ReadsAnIntegerOrAListOfThem(t *testing.T) {
	if got, err := Ints(int64(5), nil); err != nil || len(got) != 1 || got[0] != 5 {
		t.Fatalf("Ints(5) = %v %v", got, err)
	}
	if got, err := Ints([]any{int64(1), int64(2)}, nil); err != nil || len(got) != 2 || got[1] != 2 {
		t.Fatalf("Ints([1 2]) = %v %v", got, err)
	}
	if _, err := Ints([]any{int64(1), "2"}, nil); !errors.Is(err, ErrReply) {
		t.Fatalf("a string item: %v", err)
	}
}
