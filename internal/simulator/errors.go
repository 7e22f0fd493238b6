package simulator

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// errorType maps an HTTP status to the "type" vLLM puts in its error body.
func errorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "BadRequestError"
	case http.StatusUnauthorized:
		return "AuthenticationError"
	case http.StatusForbidden:
		return "PermissionDeniedError"
	case http.StatusNotFound:
		return "NotFoundError"
	case http.StatusUnprocessableEntity:
		return "UnprocessableEntityError"
	case http.StatusTooManyRequests:
		return "RateLimitError"
	case http.StatusNotImplemented:
		return "NotImplementedError"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailableError"
	}
	if status >= 500 {
		return "InternalServerError"
	}
	return "BadRequestError"
}

type errorInfo struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    int     `json:"code"`
}

type flatError struct {
	Object  string  `json:"object"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    int     `json:"code"`
}

// errorBody renders vLLM's ErrorResponse in the configured shape: nested
// {"error": {...}} (vLLM >= 0.10.1) or the older flat object.
func errorBody(shape string, status int, msg string, param *string) []byte {
	var v any
	switch shape {
	case ErrorShapeFlat:
		v = flatError{Object: "error", Message: msg, Type: errorType(status), Param: param, Code: status}
	case ErrorShapeDetail:
		v = map[string]string{"detail": msg}
	case ErrorShapeString:
		v = map[string]string{"error": msg}
	case ErrorShapeLlamaCpp:
		v = struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}{struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Type    string `json:"type"`
		}{status, msg, llamaCppErrorType(status, msg)}}
	default:
		v = struct {
			Error errorInfo `json:"error"`
		}{errorInfo{Message: msg, Type: errorType(status), Param: param, Code: status}}
	}
	return marshalNoEscape(v)
}

// marshalNoEscape marshals like Python's json.dumps: no HTML escaping of
// <, > and &.
func marshalNoEscape(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(`{}`)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func (s *Simulator) writeError(w http.ResponseWriter, status int, msg string, param *string) {
	b := errorBody(s.errorShape(), status, msg, param)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func strPtr(s string) *string { return &s }

// errorShape is the configured vLLM shape for vLLM and the engines that
// share its server (Ray, NIM), else the engine's own.
func (s *Simulator) errorShape() string {
	if d := s.dialect(); d.errorShape != ErrorShapeNested {
		return d.errorShape
	}
	return s.cfg.ErrorShape
}
