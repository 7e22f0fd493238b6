package config

import (
	"errors"
	"regexp"
	"strings"

	yaml "go.yaml.in/yaml/v2"
)

// notFoundInType matches the tail of a YAML "unknown key" error, which names
// the Go type being decoded ("field x not found in type config.plain").
var notFoundInType = regexp.MustCompile(`not found in type .*$`)

// YAMLError rewrites the "unknown key" errors of a YAML decoding error so
// that they say where the key was (where, e.g. `in global`, `in target "a"`;
// empty to say nothing beyond the line number) instead of naming an internal
// Go type. Other errors are returned as they are.
func YAMLError(err error, where string) error {
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
		out.Errors[i] = notFoundInType.ReplaceAllLiteralString(e, repl)
	}
	if msg := err.Error(); msg != te.Error() {
		// err wraps te: keep the wrapping text around the rewritten part.
		return errors.New(strings.Replace(msg, te.Error(), out.Error(), 1))
	}
	return out
}
