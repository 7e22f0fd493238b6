package simulator

import (
	"math"
	"strconv"
	"strings"
)

// pyRepr formats f exactly like Python's repr(float): the shortest
// round-trip digits, fixed notation for decimal exponents in [-4, 16) with
// at least one fractional digit ("1.0"), scientific notation otherwise
// ("1e+16", "1.5e-05").
func pyRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	// 'e' with precision -1 gives the shortest digits: d.dddde±XX.
	s := strconv.FormatFloat(f, 'e', -1, 64)
	neg := false
	if s[0] == '-' {
		neg = true
		s = s[1:]
	}
	epos := strings.IndexByte(s, 'e')
	mant, expStr := s[:epos], s[epos+1:]
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)

	var out string
	if exp >= -4 && exp < 16 {
		if exp >= 0 {
			if len(digits) <= exp+1 {
				out = digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
			} else {
				out = digits[:exp+1] + "." + digits[exp+1:]
			}
		} else {
			out = "0." + strings.Repeat("0", -exp-1) + digits
		}
	} else {
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		sign := "+"
		if exp < 0 {
			sign = "-"
			exp = -exp
		}
		e := strconv.Itoa(exp)
		if len(e) < 2 {
			e = "0" + e
		}
		out = m + "e" + sign + e
	}
	if neg {
		out = "-" + out
	}
	return out
}

// pyGoString mirrors prometheus_client.utils.floatToGoString, the function
// the Python client uses for every sample value and every le bound.
func pyGoString(d float64) string {
	switch {
	case math.IsInf(d, 1):
		return "+Inf"
	case math.IsInf(d, -1):
		return "-Inf"
	case math.IsNaN(d):
		return "NaN"
	}
	s := pyRepr(d)
	dot := strings.IndexByte(s, '.')
	// Go switches to exponents sooner than Python; the client only adjusts
	// positive values.
	if d > 0 && dot > 6 {
		mantissa := strings.TrimRight(s[:1]+"."+s[1:dot]+s[dot+1:], "0.")
		return mantissa + "e+0" + strconv.Itoa(dot-1)
	}
	return s
}
