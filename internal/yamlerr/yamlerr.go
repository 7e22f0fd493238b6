// Package yamlerr rewrites YAML decoding errors for people: they name the
// place and the expected shape, never an internal Go type.
package yamlerr

import (
	"errors"
	"regexp"
	"strings"

	yaml "go.yaml.in/yaml/v2"
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

// Rewrite rewrites the errors of a YAML decoding error that name an internal
// Go type: an unknown key says where it was (where, e.g. `in global`,
// `in target "a"`; empty to say nothing beyond the line number), a value of the
// wrong shape says which shape was expected ("cannot unmarshal !!seq into a
// mapping"). Other errors are returned as they are.
func Rewrite(err error, where string) error {
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
