package web

import (
	"net/http/httptest"
	"testing"
)

func TestPaging(t *testing.T) {
	for _, c := range []struct {
		query      string
		def        int64
		page, size int64
		badField   string
	}{
		{"", 20, 1, 20, ""},
		{"", 0, 1, 0, ""},
		{"page=3&page_size=100", 20, 3, 100, ""},
		{"page_size=7", 0, 1, 7, ""},
		{"page=0", 20, 0, 0, "page"},
		{"page=-1", 20, 0, 0, "page"},
		{"page=x", 20, 0, 0, "page"},
		{"page=1000001", 20, 0, 0, "page"},
		{"page_size=0", 0, 0, 0, "page_size"},
		{"page_size=101", 20, 0, 0, "page_size"},
		{"page_size=1e3", 20, 0, 0, "page_size"},
	} {
		page, size, e := Paging(httptest.NewRequest("GET", "/api/x?"+c.query, nil), c.def)
		if c.badField != "" {
			if e == nil || e.Status != 400 || e.Code != "INVALID_REQUEST" || e.Fields["field"] != c.badField {
				t.Errorf("%q: want 400 INVALID_REQUEST on %s, got %v", c.query, c.badField, e)
			}
			continue
		}
		if e != nil || page != c.page || size != c.size {
			t.Errorf("%q: got page %d size %d err %v, want %d %d", c.query, page, size, e, c.page, c.size)
		}
	}
}

func TestWindow(t *testing.T) {
	for _, c := range []struct{ total, page, size, lo, hi, pageSize int64 }{
		{5, 1, 0, 0, 5, 5}, // the whole list
		{5, 2, 0, 0, 0, 5}, // nothing after the one page
		{0, 1, 0, 0, 0, 0}, // an empty list
		{5, 1, 2, 0, 2, 2}, // first page
		{5, 3, 2, 4, 5, 2}, // last, short page
		{5, 4, 2, 5, 5, 2}, // past the end
		{5, 1_000_000, 100, 5, 5, 100},
	} {
		lo, hi, size := Window(c.total, c.page, c.size)
		if lo != c.lo || hi != c.hi || size != c.pageSize {
			t.Errorf("Window(%d, %d, %d) = %d, %d, %d; want %d, %d, %d", c.total, c.page, c.size, lo, hi, size, c.lo, c.hi, c.pageSize)
		}
	}
}
