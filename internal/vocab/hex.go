package vocab

// DecodeHex decodes s, exactly 2*len(dst) lower-case hexadecimal digits, into dst, and reports whether
// s was that: lower-case hex is the one spelling of the ids edgeq writes (request ids, visitor ids),
// so that an id has one spelling. No allocation.
func DecodeHex(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := fromHex(s[2*i])
		lo, ok2 := fromHex(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

// fromHex reads a lower-case hexadecimal digit.
func fromHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
