// Package decodeerr rewrites YAML and JSON decoding errors for people: they
// name the place and the expected shape, never an internal Go type.
package decodeerr

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	yaml "go.yaml.in/yaml/v2"
	yaml3 "go.yaml.in/yaml/v3"
)

// notFoundInType matches the tail of a YAML "unknown key" error, which names
// the Go type being decoded ("field x not found in type config.plain").
var notFoundInType = regexp.MustCompile(`not found in type .*$`)

// intoType matches the tail of a YAML type-mismatch error, which names the Go
// type being decoded ("cannot unmarshal !!seq into config.plain").
var intoType = regexp.MustCompile(`^(.*cannot unmarshal !!\w+.*) into (\S.*)$`)

// yamlKind names the YAML shape a Go type (as yaml's errors print it) is
// decoded from. The named types of our YAML files (configuration, file SD,
// baselines) are structs (their UnmarshalYAML methods decode into local "plain"
// copies), hence a mapping.
func yamlKind(goType string) string {
	t := strings.TrimLeft(goType, "*")
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "a mapping"
	case t == "string":
		return "a string"
	case t == "bool":
		return "true or false"
	case t == "time.Duration":
		return "a duration"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"), strings.HasPrefix(t, "float"):
		return "a number"
	}
	return "a mapping"
}

// YAML rewrites the errors of a YAML decoding error that name an internal
// Go type: an unknown key says where it was (where, e.g. `in global`,
// `in target "a"`; empty to say nothing beyond the line number), a value of the
// wrong shape says which shape was expected ("cannot unmarshal !!seq into a
// mapping"). Other errors are returned as they are.
func YAML(err error, where string) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	repl := "not found"
	if where != "" {
		repl += " " + where
	}
	out := &yaml.TypeError{Errors: make([]string, len(te.Errors))}
	for i, e := range te.Errors {
		e = notFoundInType.ReplaceAllLiteralString(e, repl)
		// Nested sections pass through here twice: rewrite Go types only.
		if m := intoType.FindStringSubmatch(e); m != nil && !strings.HasPrefix(m[2], "a ") && m[2] != "true or false" {
			e = m[1] + " into " + yamlKind(m[2])
		}
		out.Errors[i] = e
	}
	if msg := err.Error(); msg != te.Error() {
		// err wraps te: keep the wrapping text around the rewritten part.
		return errors.New(strings.Replace(msg, te.Error(), out.Error(), 1))
	}
	return out
}

// JSON rewrites a type-mismatch error of encoding/json ("json: cannot
// unmarshal object into Go value of type []*targetgroup.Group") into the key
// and the shapes found and expected ("key targets: a string where a list is
// expected"). Other errors are returned as they are. (Its offset is not turned
// into a line: inside a type's own UnmarshalJSON it counts from that value.)
func JSON(err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err
	}
	msg := fmt.Sprintf("%s where %s is expected", jsonValue(te.Value), jsonKind(te.Type))
	if f := strings.TrimLeft(te.Field, "."); f != "" {
		msg = "key " + f + ": " + msg
	}
	return errors.New(msg)
}

// jsonValue names a JSON value kind as encoding/json reports it ("object",
// "array", "string", "number", "bool", or "number 1.5").
func jsonValue(v string) string {
	switch {
	case v == "object", v == "array":
		return "an " + v
	case v == "bool":
		return "true or false"
	case strings.HasPrefix(v, "number"):
		return "a number"
	}
	return "a " + v
}

// jsonKind names the JSON shape a Go type is decoded from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another value"
}

// wantString matches a JSON schema compiler's or validator's complaint that
// a value is not a string: "at '/required/0': got boolean, want string".
var wantString = regexp.MustCompile(`at '([^']*)': got (boolean|number), want string`)

// YAML11Strings adds a hint to err, an error about doc (a value decoded from
// YAML, checked against a JSON schema, e.g. a JSON schema itself checked
// against its metaschema), for each place where a string was required and
// doc holds a boolean or a number. YAML 1.1, which yaml.v2 reads, takes an
// unquoted y, yes, n, no, on and off (any case) for booleans, and 1.0 or
// 010 for numbers: the person wrote a string and the error talks of a
// boolean. The hint names the place as a key path (required[0]) and says to
// quote the value. Other errors are returned as they are.
func YAML11Strings(err error, doc any) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	var hints []string
	seen := map[string]bool{}
	for _, m := range wantString.FindAllStringSubmatch(msg, -1) {
		if seen[m[1]] {
			continue
		}
		seen[m[1]] = true
		v, ok := atPointer(doc, m[1])
		if !ok {
			continue
		}
		path := keyPath(m[1])
		switch v := v.(type) {
		case bool:
			words := yaml11Words(v)
			hints = append(hints, fmt.Sprintf("%s is the boolean %t, not a string: YAML 1.1 reads an unquoted %s (in any case) as %t; quote the value (e.g. %q) where a string is meant",
				path, v, words, v, strings.SplitN(words, ",", 2)[0]))
		case int, int64, uint64, float64:
			hints = append(hints, fmt.Sprintf("%s is the number %v, not a string: quote it (%q) where a string is meant", path, v, fmt.Sprint(v)))
		}
	}
	if len(hints) == 0 {
		return err
	}
	return fmt.Errorf("%w (%s)", err, strings.Join(hints, "; "))
}

// atPointer returns the value at the JSON pointer ptr in doc, a value
// decoded from YAML or JSON.
func atPointer(doc any, ptr string) (any, bool) {
	if ptr == "" {
		return doc, true
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, false
	}
	cur := doc
	for _, seg := range strings.Split(ptr[1:], "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[seg]
			if !ok {
				return nil, false
			}
			cur = v
		case map[any]any:
			v, ok := c[seg]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			var i int
			if _, err := fmt.Sscan(seg, &i); err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// keyPath writes a JSON pointer as a key path: /properties/a/required/0 is
// properties.a.required[0].
func keyPath(ptr string) string {
	var b strings.Builder
	for _, seg := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		if seg != "" && strings.Trim(seg, "0123456789") == "" {
			b.WriteString("[" + seg + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}

// yaml11Bools are the booleans of YAML 1.1 (which yaml.v2 reads) that YAML
// 1.2 reads as strings: an unquoted "off" decodes as false.
var yaml11Bools = map[string]bool{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true, "on": true, "On": true, "ON": true,
	"n": false, "N": false, "no": false, "No": false, "NO": false, "off": false, "Off": false, "OFF": false,
}

// yaml11Words are the unquoted words YAML 1.1 reads as v.
func yaml11Words(v bool) string {
	if v {
		return "y, yes, on and true"
	}
	return "n, no, off and false"
}

// YAML11Bools returns an error for the first boolean of doc, a YAML
// document decoded into a value of type t, written as a YAML 1.1 boolean
// other than true or false (probe: off): yaml.v2 takes it, YAML 1.2 and the
// documentation do not. The error names the line and the key path, and
// gives the YAML 1.1 hint. Keys t does not know are left to the decoder.
func YAML11Bools(doc *yaml3.Node, t reflect.Type) error {
	return yaml11Walk(doc, t, "")
}

func yaml11Walk(n *yaml3.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch n.Kind {
	case yaml3.DocumentNode:
		for _, c := range n.Content {
			if err := yaml11Walk(c, t, path); err != nil {
				return err
			}
		}
	case yaml3.ScalarNode:
		v, ok := yaml11Bools[n.Value]
		if ok && t.Kind() == reflect.Bool && n.Style&(yaml3.SingleQuotedStyle|yaml3.DoubleQuotedStyle) == 0 {
			return fmt.Errorf("line %d: %s: %s is read as the boolean %t: YAML 1.1 reads an unquoted %s (in any case) as %t; write %t",
				n.Line, path, n.Value, v, yaml11Words(v), v, v)
		}
	case yaml3.MappingNode:
		var fields map[string]reflect.Type
		if t.Kind() == reflect.Struct {
			fields = map[string]reflect.Type{}
			yamlFields(t, fields)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			var ft reflect.Type
			switch t.Kind() {
			case reflect.Struct:
				ft = fields[key]
			case reflect.Map:
				ft = t.Elem()
			}
			if ft == nil {
				continue
			}
			p := key
			if path != "" {
				p = path + "." + key
			}
			if err := yaml11Walk(n.Content[i+1], ft, p); err != nil {
				return err
			}
		}
	case yaml3.SequenceNode:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return nil
		}
		for i, c := range n.Content {
			if err := yaml11Walk(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// yamlFields adds the YAML keys of struct t and their types to out, as
// yaml.v2 names them (the yaml tag, or the lowercased field name; inline
// structs' keys as their own).
func yamlFields(t reflect.Type, out map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				yamlFields(ft, out)
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
}
