package web

import (
	"net/http"
	"strconv"
)

// MaxPageSize is the largest page_size a list accepts.
const MaxPageSize = 100

// Paging reads a list's page (from 1, default 1) and page_size (1..MaxPageSize). A missing page_size
// is defSize; defSize 0 means "the whole list as one page", for lists that answer every item unless
// asked for a page. A malformed value is 400 INVALID_REQUEST naming the field.
func Paging(r *http.Request, defSize int64) (page, size int64, e *Error) {
	page, size = 1, defSize
	q := r.URL.Query()
	if v := q.Get("page"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > 1_000_000 {
			return 0, 0, ErrInvalidRequest.With("field", "page")
		}
		page = n
	}
	if v := q.Get("page_size"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > MaxPageSize {
			return 0, 0, ErrInvalidRequest.With("field", "page_size")
		}
		size = n
	}
	return page, size, nil
}

// Window is the part [lo, hi) of a list of total items that a page holds, and the page_size to
// answer: size 0 (the whole list) answers page_size total, and only page 1 holds anything.
func Window(total, page, size int64) (lo, hi, pageSize int64) {
	if size == 0 {
		size = total
		if page != 1 {
			return 0, 0, size
		}
	}
	lo = min((page-1)*size, total)
	return lo, min(lo+size, total), size
}
