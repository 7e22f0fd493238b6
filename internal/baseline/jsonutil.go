package baseline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// sanitizePythonJSON rewrites the non-standard tokens Python's json.dumps emits (bare NaN,
// Infinity, -Infinity) outside string literals: NaN becomes null (a missing value, which is what
// pandas means by it), ±Infinity becomes the string "inf"/"-inf".
func sanitizePythonJSON(data []byte) []byte {
	if !bytes.Contains(data, []byte("NaN")) && !bytes.Contains(data, []byte("Infinity")) {
		return data
	}
	var out bytes.Buffer
	out.Grow(len(data))
	inStr, esc := false, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inStr {
			out.WriteByte(c)
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch {
		case c == '"':
			inStr = true
			out.WriteByte(c)
		case bytes.HasPrefix(data[i:], []byte("NaN")):
			out.WriteString("null")
			i += len("NaN") - 1
		case bytes.HasPrefix(data[i:], []byte("-Infinity")):
			out.WriteString(`"-inf"`)
			i += len("-Infinity") - 1
		case bytes.HasPrefix(data[i:], []byte("Infinity")):
			out.WriteString(`"inf"`)
			i += len("Infinity") - 1
		default:
			out.WriteByte(c)
		}
	}
	return out.Bytes()
}

// decodeJSONValues decodes every top-level JSON value in data (one for a plain file, several for
// JSON Lines) with numbers kept as json.Number.
func decodeJSONValues(data []byte) ([]any, error) {
	dec := json.NewDecoder(bytes.NewReader(sanitizePythonJSON(data)))
	dec.UseNumber()
	var vals []any
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if len(vals) > 0 {
				return nil, fmt.Errorf("JSON value %d: %w", len(vals)+1, err)
			}
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		vals = append(vals, v)
	}
	return vals, nil
}

// toFloat converts a decoded JSON value to a float64. Strings holding numbers or "inf" are accepted
// (Python tools write both). present is false for a missing or null value.
func toFloat(v any) (f float64, present bool, err error) {
	switch x := v.(type) {
	case nil:
		return 0, false, nil
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return 0, true, fmt.Errorf("number %s out of range", x)
		}
		return f, true, nil
	case float64:
		return x, true, nil
	case string:
		s := strings.TrimSpace(strings.ReplaceAll(x, ",", ""))
		switch strings.ToLower(s) {
		case "inf", "+inf", "infinity":
			return math.Inf(1), true, nil
		case "-inf", "-infinity":
			return math.Inf(-1), true, nil
		case "nan", "":
			return 0, false, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, true, fmt.Errorf("%q is not a number", x)
		}
		return f, true, nil
	case bool:
		return 0, true, fmt.Errorf("%v is a boolean, not a number", x)
	}
	return 0, true, fmt.Errorf("a %s is not a number", jsonKind(v))
}

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "JSON object"
	case []any:
		return "JSON array"
	case string:
		return "string"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// jreader reads typed fields from a decoded JSON object and remembers the first type error.
type jreader struct {
	obj map[string]any
	err error
}

func (r *jreader) fail(key string, err error) {
	if r.err == nil {
		r.err = fmt.Errorf("field %q: %w", key, err)
	}
}

// f returns the finite, non-negative number at key, nil when absent or null.
func (r *jreader) f(key string) *float64 {
	v, ok := r.obj[key]
	if !ok {
		return nil
	}
	f, present, err := toFloat(v)
	if err != nil {
		r.fail(key, err)
		return nil
	}
	if !present {
		return nil
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		r.fail(key, fmt.Errorf("%v is not a finite non-negative number", f))
		return nil
	}
	return &f
}

// load returns the positive load level at key (+Inf allowed), nil when absent or null.
func (r *jreader) load(key string) *Load {
	v, ok := r.obj[key]
	if !ok {
		return nil
	}
	f, present, err := toFloat(v)
	if err != nil {
		r.fail(key, err)
		return nil
	}
	if !present {
		return nil
	}
	if !(f > 0) {
		r.fail(key, fmt.Errorf("load level %v is not positive", f))
		return nil
	}
	l := Load(f)
	return &l
}

// i returns the non-negative integer at key, nil when absent or null.
func (r *jreader) i(key string) *int64 {
	p := r.f(key)
	if p == nil {
		return nil
	}
	if *p != math.Trunc(*p) || *p > 1<<53 {
		r.fail(key, fmt.Errorf("%v is not an integer", *p))
		return nil
	}
	n := int64(*p)
	return &n
}

// s returns the string at key; numbers are formatted, other types are errors.
func (r *jreader) s(key string) string {
	switch x := r.obj[key].(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	default:
		r.fail(key, fmt.Errorf("want a string, got a %s", jsonKind(x)))
		return ""
	}
}

func fp(v float64) *float64 { return &v }
func ip(v int64) *int64     { return &v }
func lp(v float64) *Load    { l := Load(v); return &l }

// scaled returns v*k, keeping nil. Power-of-ten factors are applied in decimal so that a value
// printed as 4097.3 ms becomes exactly the float nearest 4.0973 s, not 4.097300000000001.
func scaled(v *float64, k float64) *float64 {
	if v == nil {
		return nil
	}
	return fp(scale10(*v, k))
}

func scale10(v, k float64) float64 {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return v * k
	}
	if v == 0 {
		return 0 // also for -0 (SGLang prints "-0.00" for a median rounded from below zero)
	}
	for n := -12; n <= 12; n++ {
		if k != math.Pow10(n) {
			continue
		}
		s := strconv.FormatFloat(v, 'e', -1, 64) // "4.0973e+03"
		i := strings.IndexByte(s, 'e')
		e, err := strconv.Atoi(s[i+1:])
		if err != nil {
			break
		}
		r, err := strconv.ParseFloat(s[:i]+"e"+strconv.Itoa(e+n), 64)
		if err != nil {
			break
		}
		return r
	}
	return v * k
}
