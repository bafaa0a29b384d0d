package mcpmsg

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestToken_OneAndStringOneDiffer(t *testing.T) {
	one, ok1 := ParamsToken("tools/call", json.RawMessage(`{"_meta":{"progressToken":1}}`))
	str, ok2 := ParamsToken("tools/call", json.RawMessage(`{"_meta":{"progressToken":"1"}}`))
	if !ok1 || !ok2 {
		t.Fatalf("tokens not found: %v %v", ok1, ok2)
	}
	if one == str {
		t.Fatalf("1 and \"1\" compare equal: %v", one)
	}
	m := map[Token]int{one: 1, str: 2}
	if len(m) != 2 {
		t.Fatalf("1 and \"1\" share a map key")
	}
}

func TestToken_SameNumberWrittenTwoWaysIsOneToken(t *testing.T) {
	a, _ := ParamsToken("x", json.RawMessage(`{"_meta":{"progressToken":1}}`))
	b, _ := ParamsToken("x", json.RawMessage(`{"_meta":{"progressToken":1.0}}`))
	if a != b {
		t.Fatalf("1 and 1.0 differ: %v %v", a, b)
	}
	c, err := TokenOf(int64(1))
	if err != nil || c != a {
		t.Fatalf("TokenOf(1) = %v, %v; want %v", c, err, a)
	}
}

func TestProgressToken_WhereEachMessageCarriesIt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string
		params string
		want   string // token JSON, "" for none
	}{
		{"request", "tools/call", `{"name":"x","_meta":{"progressToken":"abc"}}`, `"abc"`},
		{"request without meta", "tools/call", `{"name":"x"}`, ""},
		{"request with a top-level token is not asking", "tools/call", `{"progressToken":"abc"}`, ""},
		{"progress notification", MethodProgress, `{"progressToken":7,"progress":1}`, `7`},
		{"progress notification with meta only", MethodProgress, `{"_meta":{"progressToken":7},"progress":1}`, ""},
		{"null token", "tools/call", `{"_meta":{"progressToken":null}}`, ""},
		{"object token", "tools/call", `{"_meta":{"progressToken":{"a":1}}}`, ""},
		{"no params", "tools/call", ``, ""},
		{"params not an object", "tools/call", `[1,2]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, ok := ProgressToken(&jsonrpc.Request{Method: tc.method, Params: json.RawMessage(tc.params)})
			if ok != (tc.want != "") || tok.String() != tc.want {
				t.Fatalf("got %q, %v; want %q", tok, ok, tc.want)
			}
		})
	}
}

func TestWithProgressToken_ReplacesOnlyTheToken(t *testing.T) {
	req := &jsonrpc.Request{ID: IntID(1), Method: "tools/call",
		Params: json.RawMessage(`{"name":"x","arguments":{"big":12345678901234567890,"html":"<b>"},"_meta":{"progressToken":1,"other":true}}`)}
	out, err := WithProgressToken(req, StringToken("relay-9"))
	if err != nil {
		t.Fatal(err)
	}
	if tok, _ := ProgressToken(out); tok != StringToken("relay-9") {
		t.Fatalf("token = %v", tok)
	}
	var got struct {
		Arguments json.RawMessage            `json:"arguments"`
		Meta      map[string]json.RawMessage `json:"_meta"`
	}
	json.Unmarshal(out.Params, &got)
	if string(got.Arguments) != `{"big":12345678901234567890,"html":"<b>"}` {
		t.Fatalf("arguments changed: %s", got.Arguments)
	}
	if string(got.Meta["other"]) != "true" {
		t.Fatalf("other _meta members lost: %s", out.Params)
	}
	if tok, _ := ProgressToken(req); tok.String() != "1" {
		t.Fatalf("the original was modified: %s", req.Params)
	}

	n := &jsonrpc.Request{Method: MethodProgress, Params: json.RawMessage(`{"progressToken":"relay-9","progress":3,"total":10}`)}
	back, err := WithProgressToken(n, tok1(t))
	if err != nil {
		t.Fatal(err)
	}
	if string(back.Params) != `{"progress":3,"progressToken":1,"total":10}` {
		t.Fatalf("notification params = %s", back.Params)
	}
}

func tok1(t *testing.T) Token {
	tok, err := TokenOf(1)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestToken_JSONRoundTrip(t *testing.T) {
	var v struct {
		T Token `json:"t"`
	}
	if err := json.Unmarshal([]byte(`{"t":"a"}`), &v); err != nil || v.T != StringToken("a") {
		t.Fatalf("%v %v", v.T, err)
	}
	b, _ := json.Marshal(v)
	if string(b) != `{"t":"a"}` {
		t.Fatalf("%s", b)
	}
	if err := json.Unmarshal([]byte(`{"t":[1]}`), &v); err == nil {
		t.Fatal("an array was taken as a token")
	}
	if _, err := TokenOf(true); err == nil {
		t.Fatal("a bool was taken as a token")
	}
	if (Token{}).Value() != nil || StringToken("x").Value() != "x" {
		t.Fatal("Value")
	}
}

func FuzzParamsToken(f *testing.F) {
	f.Add(MethodProgress, []byte(`{"progressToken":1}`))
	f.Add("tools/call", []byte(`{"_meta":{"progressToken":"a"}}`))
	f.Add("tools/call", []byte(`{"_meta":[]}`))
	f.Fuzz(func(t *testing.T, method string, params []byte) {
		tok, ok := ParamsToken(method, params)
		if !ok {
			return
		}
		// A token read back from where it was written is the same token.
		req := &jsonrpc.Request{Method: method, Params: params}
		out, err := WithProgressToken(req, tok)
		if err != nil {
			t.Fatalf("rewriting a token that was read: %v", err)
		}
		if again, ok := ProgressToken(out); !ok || again != tok {
			t.Fatalf("token %v became %v", tok, again)
		}
	})
}
