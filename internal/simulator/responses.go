package simulator

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// POST /v1/responses, vLLM's OpenAI-compatible Responses API with stream:
// true, in the event shapes of vLLM's entrypoints/openai/serving_responses.py
// (responses_stream_generator, _process_simple_streaming_events) and
// protocol.py: each event is sent as "event: <type>" and "data: <JSON>"
// (api_router.py, _convert_stream_to_sse_events), numbered by
// sequence_number, and the stream ends after response.completed, without
// data: [DONE]:
//
//	response.created, response.in_progress     at once
//	response.output_item.added,
//	response.content_part.added                with the first token
//	response.output_text.delta                 one per token
//	response.output_text.done, response.content_part.done,
//	response.output_item.done, response.completed (with usage)
//
// A generation error is one error event. vllm_sim serves the streaming form
// only.

type responsesRequest struct {
	Model           string          `json:"model"`
	Input           json.RawMessage `json:"input"`
	MaxOutputTokens *int            `json:"max_output_tokens"`
	MinTokens       int             `json:"min_tokens"`
	IgnoreEOS       bool            `json:"ignore_eos"`
	Stream          bool            `json:"stream"`
	N               *int            `json:"n"`
}

func (s *Simulator) responsesGen(req *responsesRequest, r *http.Request, arrival time.Time) (*genRequest, error) {
	if !req.Stream {
		return nil, &apiError{http.StatusBadRequest, "vllm_sim serves /v1/responses with stream: true only", strPtr("stream")}
	}
	g, err := s.newGenRequest(r, arrival, false, req.Model, req.N, true, nil)
	if err != nil {
		return nil, err
	}
	g.responses, g.id = true, "resp_"+g.requestID
	text, err := responsesInput(req.Input)
	if err != nil {
		return nil, err
	}
	g.out.prompt = text
	return g, s.finishGenRequest(g, text, 0, req.MaxOutputTokens, req.MinTokens, req.IgnoreEOS)
}

// responsesInput is the text of a Responses API input: a string, or a list
// of messages whose content is a string or text parts (the last user
// message counts for answers, as for chat).
func responsesInput(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", &apiError{http.StatusBadRequest, "input is required", strPtr("input")}
	}
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		return text, nil
	}
	var msgs []chatMessage
	if err := json.Unmarshal(raw, &msgs); err != nil || len(msgs) == 0 {
		return "", &apiError{http.StatusBadRequest, "input must be a string or a list of messages", strPtr("input")}
	}
	var sb strings.Builder
	for _, m := range msgs {
		c, err := messageText(m.Content)
		if err != nil {
			return "", err
		}
		sb.WriteString(c)
	}
	return sb.String(), nil
}

// responsesSink writes a request's Responses API events.
type responsesSink struct {
	*streamSink
	itemID string
	text   strings.Builder // the answer so far, for the .done events
	seq    int
}

func (s *Simulator) newResponsesSink(w http.ResponseWriter, g *genRequest) *responsesSink {
	return &responsesSink{streamSink: s.newStreamSink(w, g), itemID: "msg_" + g.requestID}
}

// event sends one event of type typ whose JSON fields (without type and
// sequence_number) are fields.
func (o *responsesSink) event(typ, fields, kind string, token int) error {
	b := append(o.buf[:0], "event: "+typ+"\ndata: {"...)
	if fields != "" {
		b = append(b, fields...)
		b = append(b, ',')
	}
	b = append(b, `"sequence_number":`...)
	b = strconv.AppendInt(b, int64(o.seq), 10)
	b = append(b, `,"type":"`+typ+`"}`+"\n\n"...)
	o.buf = b
	o.seq++
	return o.send(b, kind, token)
}

// response is the response object of the lifecycle events.
func (o *responsesSink) response(status, output, usage string) string {
	return `"response":{"id":` + string(quoteJSON(o.g.id)) + `,"created_at":` + strconv.FormatInt(o.g.created, 10) +
		`,"model":` + string(quoteJSON(o.g.model)) + `,"object":"response","output":` + output +
		`,"status":"` + status + `","usage":` + usage + `}`
}

func (o *responsesSink) start() error {
	if err := o.streamSink.start(); err != nil {
		return err
	}
	if err := o.event("response.created", o.response("in_progress", "[]", "null"), "event", 0); err != nil {
		return err
	}
	return o.event("response.in_progress", o.response("in_progress", "[]", "null"), "event", 0)
}

func (o *responsesSink) first() error { return nil }

func (o *responsesSink) item(status, content string) string {
	return `{"id":` + string(quoteJSON(o.itemID)) + `,"content":` + content + `,"role":"assistant","status":"` + status + `","type":"message"}`
}

func (o *responsesSink) token(k int, _ string, text []byte) error {
	if k == 1 {
		if err := o.event("response.output_item.added", `"item":`+o.item("in_progress", "[]")+`,"output_index":0`, "event", 0); err != nil {
			return err
		}
		if err := o.event("response.content_part.added", `"content_index":0,"item_id":`+string(quoteJSON(o.itemID))+
			`,"output_index":0,"part":{"annotations":[],"text":"","type":"output_text","logprobs":[]}`, "event", 0); err != nil {
			return err
		}
	}
	var t string
	_ = json.Unmarshal(text, &t)
	o.text.WriteString(t)
	return o.event("response.output_text.delta", `"content_index":0,"delta":`+string(text)+`,"item_id":`+string(quoteJSON(o.itemID))+
		`,"logprobs":[],"output_index":0`, "token", k)
}

// toolCall sends a tool call's arguments as text: vllm_sim's Responses API
// takes no tools.
func (o *responsesSink) toolCall(k int, finish string, sc *script) error {
	return o.token(k, finish, sc.pieces[k-1])
}

func (o *responsesSink) malformed(k int) error {
	b := append(o.buf[:0], "event: response.output_text.delta\ndata: {\"delta\":\" trunc"...) // cut mid-string
	b = append(b, "\n\n"...)
	o.buf = b
	return o.send(b, "malformed", k)
}

// errorEvent is vLLM's GenerationError in the stream: an error event, and
// the end of the stream.
func (o *responsesSink) errorEvent(msg string) error {
	if err := o.event("error", `"code":"InternalServerError","message":`+string(quoteJSON(msg))+`,"param":null`, "error", 0); err != nil {
		return err
	}
	o.flushTrace()
	return nil
}

func (o *responsesSink) end(prompt, completion int) error {
	text := string(quoteJSON(o.text.String()))
	part := `{"annotations":[],"text":` + text + `,"type":"output_text","logprobs":null}`
	id := string(quoteJSON(o.itemID))
	if completion > 0 {
		for _, e := range []struct{ typ, fields string }{
			{"response.output_text.done", `"content_index":0,"item_id":` + id + `,"logprobs":[],"output_index":0,"text":` + text},
			{"response.content_part.done", `"content_index":0,"item_id":` + id + `,"output_index":0,"part":` + part},
			{"response.output_item.done", `"item":` + o.item("completed", "["+part+"]") + `,"output_index":0`},
		} {
			if err := o.event(e.typ, e.fields, "event", completion); err != nil {
				return err
			}
		}
	}
	usage := `{"input_tokens":` + strconv.Itoa(prompt) + `,"input_tokens_details":{"cached_tokens":0},"output_tokens":` +
		strconv.Itoa(completion) + `,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":` + strconv.Itoa(prompt+completion) + `}`
	output := "[]"
	if completion > 0 {
		output = "[" + o.item("completed", "["+part+"]") + "]"
	}
	o.flushTrace()
	return o.event("response.completed", o.response("completed", output, usage), "usage", completion)
}

// flushTrace makes the trace durable before the stream's last event.
func (o *responsesSink) flushTrace() {
	if t := o.s.tracer; t != nil {
		t.flush()
	}
}
