package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"reflect"
	"regexp"
	"strings"
	"sync"
)

// decodeStrict reads exactly one JSON object from data into v (a pointer to
// a struct with json tags). Refused with 400 malformed_json: an empty body,
// a syntax error, anything but an object at the top level, data after the
// object, a member of the wrong JSON type (field names it), a member v
// does not know (field names it: a misspelt "ammount" must not be silently
// dropped from a payment), a key given twice, and a key that matches a
// field only when case is ignored (checkKeys). Value checks are the
// domain's (422).
func decodeStrict(data []byte, v any) error {
	trimmed := trimJSONSpace(data)
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
	return checkKeys(trimmed, jsonNames(reflect.TypeOf(v)))
}

// trimJSONSpace drops the whitespace JSON allows around a value (RFC 8259:
// space, tab, line feed, carriage return) and nothing else: bytes.TrimSpace
// would also drop a form feed or a no-break space, and weir would then accept
// a body that no JSON parser reads.
func trimJSONSpace(data []byte) []byte {
	return bytes.Trim(data, " \t\n\r")
}

// checkKeys refuses, with 400 malformed_json naming the key, what
// encoding/json would silently resolve: a key given twice in one object
// (the last would win: {"amount":"1","amount":"3"}), and a key that is not
// one of names but equals one of them when case is ignored, with Unicode
// folding (encoding/json would take {"AMOUNT":"3"} or {"aſſet":…} as the
// field). Other parsers would read such a body differently; weir reads
// only bodies every parser reads alike. data must be valid JSON.
func checkKeys(data []byte, names map[string]bool) error {
	type frame struct {
		object, wantKey bool
		keys            map[string]bool
	}
	var stack []*frame
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // io.EOF; syntax errors are the decoder's to report
		}
		if n := len(stack); n > 0 && stack[n-1].wantKey {
			top := stack[n-1]
			key, ok := tok.(string)
			if !ok { // the object's closing brace
				stack = stack[:n-1]
				valueDone()
				continue
			}
			if top.keys[key] {
				return apiError(CodeMalformedJSON, key, fmt.Sprintf("key %q appears twice in one object", key))
			}
			top.keys[key] = true
			if !names[key] {
				for name := range names {
					if strings.EqualFold(name, key) {
						return apiError(CodeMalformedJSON, key, fmt.Sprintf("key %q is not %q: keys are case-sensitive", key, name))
					}
				}
			}
			top.wantKey = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, wantKey: true, keys: map[string]bool{}})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
	}
}

// CheckKeys is checkKeys for a JSON document read from a file (--policy,
// --custody): schema is a value of the type whose JSON member names the
// document uses. A document that is not JSON is left to its decoder.
func CheckKeys(data []byte, schema any) error {
	if !json.Valid(data) {
		return nil
	}
	return checkKeys(data, jsonNames(reflect.TypeOf(schema)))
}

var namesCache sync.Map // reflect.Type → map[string]bool

// jsonNames is every JSON member name of t's structs, nested ones included.
func jsonNames(t reflect.Type) map[string]bool {
	if m, ok := namesCache.Load(t); ok {
		return m.(map[string]bool)
	}
	names := map[string]bool{}
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case name == "-" || !f.IsExported() && !f.Anonymous:
				continue
			case f.Anonymous && name == "":
				walk(f.Type)
				continue
			case name == "":
				name = f.Name
			}
			names[name] = true
			walk(f.Type)
		}
	}
	walk(t)
	namesCache.Store(t, names)
	return names
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
