package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// ByteSize is an amount of memory in bytes (server.spool_bytes). The file takes a whole number of
// bytes or one with a unit: KiB, MiB, GiB (1024-based, as config.example.yaml writes "8MiB") or kB, MB, GB
// (1000-based), in any letter case, with or without a space before the unit.
type ByteSize int64

var byteSizeType = reflect.TypeFor[ByteSize]()

// byteUnits are the units ParseByteSize knows, by lower-case name.
var byteUnits = map[string]int64{
	"": 1, "b": 1,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
	"kb": 1e3, "mb": 1e6, "gb": 1e9,
}

// ParseByteSize reads a size such as "8MiB", "512 KiB" or "1048576".
func ParseByteSize(s string) (ByteSize, error) {
	text := strings.TrimSpace(s)
	digits := len(text) - len(strings.TrimLeft(text, "0123456789"))
	if digits == 0 {
		return 0, fmt.Errorf("invalid size %q (use a whole number of bytes or one with a unit, such as 8MiB or 512KiB)", s)
	}
	n, err := strconv.ParseInt(text[:digits], 10, 64)
	unit, known := byteUnits[strings.ToLower(strings.TrimSpace(text[digits:]))]
	switch {
	case !known:
		return 0, fmt.Errorf("invalid size %q: unknown unit (use B, KiB, MiB, GiB, kB, MB or GB)", s)
	case err != nil || n > math.MaxInt64/unit:
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return ByteSize(n * unit), nil
}

// String writes the size the way the file takes it: in the largest 1024-based unit that divides it,
// else in bytes.
func (b ByteSize) String() string {
	for _, u := range []struct {
		name string
		size ByteSize
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b != 0 && b%u.size == 0 {
			return strconv.FormatInt(int64(b/u.size), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

func (d *decoder) decodeByteSize(path string, in any, out reflect.Value) {
	switch v := in.(type) {
	case string:
		size, err := ParseByteSize(v)
		if err != nil {
			d.fail(path, "%v", err)
			return
		}
		out.SetInt(int64(size))
	case int, int64, uint64, float64:
		n, ok := toInt(v)
		if !ok {
			d.fail(path, "must be a whole number of bytes, not %v", v)
			return
		}
		out.SetInt(n)
	default:
		d.fail(path, "must be a size such as 8MiB, not %s", describe(in))
	}
}

// maxSpoolBytes bounds server.spool_bytes: a replica may hold several answers of that size at once
// (docs/reference.md, "In-flight limits"), so more than a gibibyte per answer is a slip.
const maxSpoolBytes = 1 << 30
