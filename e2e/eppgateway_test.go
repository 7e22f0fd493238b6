package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// eppDestination is the request header in which the Endpoint Picker names the
// endpoint it picked (ip:port, or a comma-separated list: the first is the
// pick, the others fallbacks), and the response header in which this data
// plane passes it back to the client, so that a probe can tell which member
// answered.
const eppDestination = "x-gateway-destination-endpoint"

// eppGateway is the data plane of an inference gateway, written here because
// Envoy cannot be installed in the tests: an HTTP proxy that, per request,
// runs Envoy's ext_proc exchange with the Endpoint Picker, as Envoy does with
// the processing mode of the inference extension's own Envoy configuration
// (request and response headers SEND, bodies FULL_DUPLEX_STREAMED, lower-case
// header keys, the response status as :status):
//
//   - request headers, then the whole request body with end_of_stream;
//   - the EPP answers with a header mutation naming the destination and the
//     (possibly rewritten) body, or with an immediate response (its 4xx/5xx
//     refusals, returned to the client as they are);
//   - the request goes to the destination; its response headers, then each
//     chunk of its body as it arrives, go to the EPP, and the EPP's body
//     mutations are streamed to the client.
type eppGateway struct {
	epp    extprocv3.ExternalProcessorClient
	client *http.Client
}

// newEPPGateway connects to the EPP's ext_proc gRPC server at addr (plain
// text: the EPP runs with --secure-serving=false). The connection is closed
// by the returned func.
func newEPPGateway(addr string) (*eppGateway, func(), error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to the EPP at %s: %w", addr, err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	g := &eppGateway{epp: extprocv3.NewExternalProcessorClient(conn), client: &http.Client{Transport: tr}}
	return g, func() { tr.CloseIdleConnections(); conn.Close() }, nil
}

func (g *eppGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := g.serve(w, r); err != nil {
		// Envoy's own answer when ext_proc or the upstream fails before a
		// response started; once headers are out, the stream just ends.
		http.Error(w, "data plane: "+err.Error(), http.StatusBadGateway)
	}
}

// errResponded reports that the response is already (partly) written.
var errResponded = errors.New("response already started")

func (g *eppGateway) serve(w http.ResponseWriter, r *http.Request) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("reading the request body: %w", err)
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stream, err := g.epp.Process(ctx)
	if err != nil {
		return fmt.Errorf("ext_proc stream: %w", err)
	}
	hdrs := []*corev3.HeaderValue{
		{Key: ":method", RawValue: []byte(r.Method)},
		{Key: ":path", RawValue: []byte(r.URL.RequestURI())},
		{Key: ":authority", RawValue: []byte(r.Host)},
		{Key: ":scheme", RawValue: []byte("http")},
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			hdrs = append(hdrs, &corev3.HeaderValue{Key: strings.ToLower(k), RawValue: []byte(v)})
		}
	}
	// A request without a body (GET /health) ends with its headers; the EPP
	// sends it to an endpoint of its choice.
	noBody := len(body) == 0
	if err := stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: hdrs}, EndOfStream: noBody}}}); err != nil {
		return fmt.Errorf("sending request headers to the EPP: %w", err)
	}
	if !noBody {
		if err := stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
			RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}}}); err != nil {
			return fmt.Errorf("sending the request body to the EPP: %w", err)
		}
	}

	// The request phase: the destination and the body to send.
	upstreamHdr := r.Header.Clone()
	var dest string
	var upBody bytes.Buffer
	for done := false; !done; {
		resp, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("EPP, request phase: %w", err)
		}
		switch v := resp.Response.(type) {
		case *extprocv3.ProcessingResponse_ImmediateResponse:
			writeImmediate(w, v.ImmediateResponse)
			return nil
		case *extprocv3.ProcessingResponse_RequestHeaders:
			for _, o := range v.RequestHeaders.GetResponse().GetHeaderMutation().GetSetHeaders() {
				k, val := o.GetHeader().GetKey(), headerValue(o.GetHeader())
				switch {
				case k == eppDestination:
					dest = val
				case strings.HasPrefix(k, ":"), strings.EqualFold(k, "content-length"):
				default:
					upstreamHdr.Set(k, val)
				}
			}
			done = noBody
		case *extprocv3.ProcessingResponse_RequestBody:
			switch m := v.RequestBody.GetResponse().GetBodyMutation().GetMutation().(type) {
			case *extprocv3.BodyMutation_StreamedResponse:
				upBody.Write(m.StreamedResponse.GetBody())
				done = m.StreamedResponse.GetEndOfStream()
			case *extprocv3.BodyMutation_Body:
				upBody.Reset()
				upBody.Write(m.Body)
				done = true
			default:
				upBody.Reset()
				upBody.Write(body)
				done = true
			}
		}
	}
	dest, _, _ = strings.Cut(dest, ",")
	if dest == "" {
		return errors.New("the EPP named no destination")
	}

	req, err := http.NewRequestWithContext(ctx, r.Method, "http://"+dest+r.URL.RequestURI(), &upBody)
	if err != nil {
		return fmt.Errorf("building the upstream request: %w", err)
	}
	req.Header = upstreamHdr
	up, err := g.client.Do(req)
	if err != nil {
		return fmt.Errorf("upstream %s: %w", dest, err)
	}
	defer up.Body.Close()

	// The response phase. Headers first, then the body chunks from a second
	// goroutine while this one streams the EPP's answers to the client.
	hdrs = []*corev3.HeaderValue{{Key: ":status", RawValue: []byte(strconv.Itoa(up.StatusCode))}}
	for k, vs := range up.Header {
		for _, v := range vs {
			hdrs = append(hdrs, &corev3.HeaderValue{Key: strings.ToLower(k), RawValue: []byte(v)})
		}
	}
	if err := stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: hdrs}}}}); err != nil {
		return fmt.Errorf("sending response headers to the EPP: %w", err)
	}
	sendErr := make(chan error, 1)
	go func() { sendErr <- sendBody(stream, up.Body) }()
	err = g.respond(w, stream, up, dest)
	cancel() // ends sendBody if the exchange failed first
	if serr := <-sendErr; err == nil && serr != nil && ctx.Err() == nil {
		err = serr
	}
	if errors.Is(err, errResponded) {
		return nil
	}
	return err
}

// sendBody sends the upstream body to the EPP chunk by chunk, as it arrives,
// and an empty chunk with end_of_stream at its end.
func sendBody(stream extprocv3.ExternalProcessor_ProcessClient, body io.Reader) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			chunk := append([]byte(nil), buf[:n]...)
			if serr := stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
				ResponseBody: &extprocv3.HttpBody{Body: chunk}}}); serr != nil {
				return fmt.Errorf("sending a response chunk to the EPP: %w", serr)
			}
		}
		if errors.Is(err, io.EOF) {
			if serr := stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
				ResponseBody: &extprocv3.HttpBody{EndOfStream: true}}}); serr != nil {
				return fmt.Errorf("sending the end of the response to the EPP: %w", serr)
			}
			return stream.CloseSend()
		}
		if err != nil {
			return fmt.Errorf("reading the upstream response: %w", err)
		}
	}
}

// respond writes the EPP's response-phase answers to the client: the header
// mutation on the upstream's headers (and the destination), then every body
// mutation, flushed, until the one with end_of_stream.
func (g *eppGateway) respond(w http.ResponseWriter, stream extprocv3.ExternalProcessor_ProcessClient, up *http.Response, dest string) error {
	rc := http.NewResponseController(w)
	started := false
	for {
		resp, err := stream.Recv()
		if err != nil {
			if started {
				return errResponded
			}
			return fmt.Errorf("EPP, response phase: %w", err)
		}
		switch v := resp.Response.(type) {
		case *extprocv3.ProcessingResponse_ImmediateResponse:
			if started {
				return errResponded
			}
			writeImmediate(w, v.ImmediateResponse)
			return errResponded
		case *extprocv3.ProcessingResponse_ResponseHeaders:
			h := w.Header()
			for k, vs := range up.Header {
				if !strings.EqualFold(k, "Content-Length") {
					h[k] = vs
				}
			}
			for _, o := range v.ResponseHeaders.GetResponse().GetHeaderMutation().GetSetHeaders() {
				if k := o.GetHeader().GetKey(); !strings.HasPrefix(k, ":") && !strings.EqualFold(k, "content-length") {
					h.Set(k, headerValue(o.GetHeader()))
				}
			}
			h.Set(eppDestination, dest)
			w.WriteHeader(up.StatusCode)
			_ = rc.Flush()
			started = true
		case *extprocv3.ProcessingResponse_ResponseBody:
			m := v.ResponseBody.GetResponse().GetBodyMutation()
			if s := m.GetStreamedResponse(); s != nil {
				if _, err := w.Write(s.GetBody()); err != nil {
					return errResponded
				}
				_ = rc.Flush()
				if s.GetEndOfStream() {
					return nil
				}
			}
		}
	}
}

// writeImmediate writes an immediate response (the EPP's refusals: text/plain
// "inference error: <Code> - <message>").
func writeImmediate(w http.ResponseWriter, ir *extprocv3.ImmediateResponse) {
	h := w.Header()
	h.Set("Content-Type", "text/plain")
	for _, o := range ir.GetHeaders().GetSetHeaders() {
		if k := o.GetHeader().GetKey(); !strings.HasPrefix(k, ":") {
			h.Set(k, headerValue(o.GetHeader()))
		}
	}
	code := int(ir.GetStatus().GetCode())
	if code == 0 {
		code = http.StatusOK
	}
	w.WriteHeader(code)
	_, _ = w.Write(ir.GetBody())
}

func headerValue(h *corev3.HeaderValue) string {
	if len(h.GetRawValue()) > 0 {
		return string(h.GetRawValue())
	}
	return h.GetValue()
}
