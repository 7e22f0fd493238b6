// Package vllmapi is vllm_prober's one client of vLLM's informational API:
// GET /v1/models, /health and /version (vLLM's
// vllm/entrypoints/openai/api_server.py), and llama-server's /props. The prober, the collector and
// bench use it with the client the caller gives (from internal/httpclient,
// which sets the User-Agent). Errors never carry the request URL, which may
// hold userinfo.
package vllmapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// maxBody bounds the answers read (a /v1/models list of many LoRA adapters
// stays far below it).
const maxBody = 4 << 20

// Model is one entry of /v1/models (vLLM's ModelCard).
type Model struct {
	ID          string `json:"id"`
	MaxModelLen int    `json:"max_model_len"`
	Root        string `json:"root"`
	Parent      string `json:"parent"`
}

// StatusError is an answer other than 200 OK; Body is its start, as the
// server sent it (the caller scrubs it before showing it).
type StatusError struct {
	Path string
	Code int
	Body []byte
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("GET %s: HTTP %d", e.Path, e.Code)
}

// DecodeError is a 200 OK whose body is not the JSON expected.
type DecodeError struct {
	Path string
	Err  error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("GET %s: decoding answer: %v", e.Path, e.Err)
}
func (e *DecodeError) Unwrap() error { return e.Err }

// get fetches base+path and returns the body of a 200 answer. Transport
// errors come back unwrapped from their *url.Error (whose URL may carry
// userinfo), so that callers can classify them.
func get(ctx context.Context, client *http.Client, base, path string, header http.Header) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+path, nil)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("building GET %s request: %w", path, err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("GET %s: reading answer: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &StatusError{Path: path, Code: resp.StatusCode, Body: body}
	}
	return body, nil
}

// Models lists the served models, in the server's order. header holds extra
// request headers (nil: none).
func Models(ctx context.Context, client *http.Client, base string, header http.Header) ([]Model, error) {
	body, err := get(ctx, client, base, "/v1/models", header)
	if err != nil {
		return nil, err
	}
	var list struct {
		Data []Model `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, &DecodeError{Path: "/v1/models", Err: err}
	}
	return list.Data, nil
}

// Health reports whether the health check path (vLLM's /health, or what
// an engine without it serves) answers 200 OK.
func Health(ctx context.Context, client *http.Client, base, path string) error {
	_, err := get(ctx, client, base, path, nil)
	return err
}

// Version returns /version's "version".
func Version(ctx context.Context, client *http.Client, base string) (string, error) {
	body, err := get(ctx, client, base, "/version", nil)
	if err != nil {
		return "", err
	}
	var v struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return "", &DecodeError{Path: "/version", Err: err}
	}
	return v.Version, nil
}

// Props is what llama.cpp's llama-server says of itself on GET /props
// (ggml-org/llama.cpp tools/server/server-context.cpp, get_props): its
// build, the context of one slot and the number of slots (--parallel).
type Props struct {
	BuildInfo                 string `json:"build_info"`
	TotalSlots                int    `json:"total_slots"`
	DefaultGenerationSettings struct {
		NCtx int `json:"n_ctx"`
	} `json:"default_generation_settings"`
}

// LlamaCppProps reads llama-server's GET /props.
func LlamaCppProps(ctx context.Context, client *http.Client, base string) (Props, error) {
	var p Props
	body, err := get(ctx, client, base, "/props", nil)
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return p, &DecodeError{Path: "/props", Err: err}
	}
	return p, nil
}

// IsSleeping returns /is_sleeping's "is_sleeping": whether vLLM's sleep
// mode has put the engine to sleep (POST /sleep). vLLM serves the route in
// dev mode only; elsewhere the answer is a *StatusError (404).
func IsSleeping(ctx context.Context, client *http.Client, base string) (bool, error) {
	body, err := get(ctx, client, base, "/is_sleeping", nil)
	if err != nil {
		return false, err
	}
	var v struct {
		IsSleeping *bool `json:"is_sleeping"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return false, &DecodeError{Path: "/is_sleeping", Err: err}
	}
	if v.IsSleeping == nil {
		return false, &DecodeError{Path: "/is_sleeping", Err: errors.New(`no "is_sleeping" field`)}
	}
	return *v.IsSleeping, nil
}
