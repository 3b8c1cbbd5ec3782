package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"regexp"
	"strings"
)

// decodeStrict reads exactly one JSON object from data into v (a pointer to
// a struct with json tags). Refused with 400 malformed_json: an empty body,
// a syntax error, anything but an object at the top level, data after the
// object, a member of the wrong JSON type (field names it), and a member v
// does not know (field names it: a misspelt "ammount" must not be silently
// dropped from a payment). Value checks are the domain's (422).
func decodeStrict(data []byte, v any) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return apiError(CodeMalformedJSON, "", "the body is empty; a JSON object is required")
	}
	if trimmed[0] != '{' {
		return apiError(CodeMalformedJSON, "", "the body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return apiError(CodeMalformedJSON, "", "unexpected data after the JSON object")
	}
	return nil
}

var unknownFieldRE = regexp.MustCompile(`unknown (?:field|object member name) "((?:[^"\\]|\\.)*)"`)

// jsonError turns an encoding/json error into malformed_json, naming the
// field when the decoder says which one.
func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return apiError(CodeMalformedJSON, "", fmt.Sprintf("invalid JSON at byte %d: %v", syn.Offset, syn))
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return apiError(CodeMalformedJSON, "", "the JSON document ends early")
	case errors.As(err, &typ):
		field := typ.Field
		want := typ.Type.Kind().String()
		if typ.Type.Kind().String() == "string" {
			want = "a JSON string"
		}
		if field == "" {
			return apiError(CodeMalformedJSON, "", fmt.Sprintf("a JSON %s cannot be used here", typ.Value))
		}
		return apiError(CodeMalformedJSON, field, fmt.Sprintf("%s must be %s, not a JSON %s", field, want, typ.Value))
	}
	if m := unknownFieldRE.FindStringSubmatch(err.Error()); m != nil {
		return apiError(CodeMalformedJSON, m[1], fmt.Sprintf("unknown field %q", m[1]))
	}
	return apiError(CodeMalformedJSON, "", "malformed JSON body")
}

// checkJSONMediaType accepts application/json with an optional utf-8
// charset parameter (JSON is UTF-8; any other charset is refused).
func checkJSONMediaType(contentType string) error {
	if contentType == "" {
		return apiError(CodeUnsupportedMediaType, "", "Content-Type: application/json is required")
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "application/json" {
		return apiError(CodeUnsupportedMediaType, "", fmt.Sprintf("Content-Type must be application/json, not %q", contentType))
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
		return apiError(CodeUnsupportedMediaType, "", fmt.Sprintf("charset %q is not supported; JSON is UTF-8", cs))
	}
	return nil
}
