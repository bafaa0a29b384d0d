package mcpmsg

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestSetMember(t *testing.T) {
	for _, tc := range []struct {
		name  string
		obj   string
		value string // "" removes
		path  []string
		want  string
		err   bool
	}{
		{"set", `{"a":1}`, `2`, []string{"b"}, `{"a":1,"b":2}`, false},
		{"replace", `{"a":1}`, `"x"`, []string{"a"}, `{"a":"x"}`, false},
		{"remove", `{"a":1,"b":2}`, ``, []string{"a"}, `{"b":2}`, false},
		{"nested, created", `{"a":1}`, `"t"`, []string{"_meta", "progressToken"}, `{"_meta":{"progressToken":"t"},"a":1}`, false},
		{"null object", `null`, `1`, []string{"a"}, `{"a":1}`, false},
		{"absent object", ``, `1`, []string{"a"}, `{"a":1}`, false},
		{"keeps bytes", `{"n":1.50,"s":"<&>"}`, `1`, []string{"a"}, `{"a":1,"n":1.50,"s":"<&>"}`, false},
		{"not an object", `[1]`, `1`, []string{"a"}, ``, true},
		{"nested not an object", `{"_meta":3}`, `1`, []string{"_meta", "x"}, ``, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var value json.RawMessage
			if tc.value != "" {
				value = json.RawMessage(tc.value)
			}
			got, err := SetMember(json.RawMessage(tc.obj), value, tc.path...)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v", err)
			}
			if !tc.err && string(got) != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestSetMeta_LeavesNonObjectsAlone(t *testing.T) {
	if got := SetMeta(json.RawMessage(`[1]`), "k", "v"); string(got) != `[1]` {
		t.Fatalf("got %s", got)
	}
	if got := SetMeta(json.RawMessage(`{"_meta":{"a":12345678901234567890}}`), "k", "v"); string(got) != `{"_meta":{"a":12345678901234567890,"k":"v"}}` {
		t.Fatalf("got %s: other _meta members must keep their bytes", got)
	}
}

func TestStringParam(t *testing.T) {
	if got := StringParam(json.RawMessage(`{"uri":"file:///a"}`), "uri"); got != "file:///a" {
		t.Fatal(got)
	}
	if got := StringParam(json.RawMessage(`{"uri":3}`), "uri"); got != "" {
		t.Fatal(got)
	}
}

func TestCancelled_RoundTrip(t *testing.T) {
	for _, id := range []jsonrpc.ID{IntID(42), StringID("42")} {
		n := Cancelled(id, "gone")
		got, reason, ok := CancelledRequest(n.Params)
		if !ok || got != id || reason != "gone" {
			t.Fatalf("%v: got %v %q %v", id.Raw(), got.Raw(), reason, ok)
		}
	}
	n, err := WithCancelledRequest(&jsonrpc.Request{Method: MethodCancelled, Params: json.RawMessage(`{"requestId":"e1","reason":"r"}`)}, IntID(7))
	if err != nil {
		t.Fatal(err)
	}
	if string(n.Params) != `{"reason":"r","requestId":7}` {
		t.Fatalf("%s", n.Params)
	}
	if _, _, ok := CancelledRequest(json.RawMessage(`{"reason":"x"}`)); ok {
		t.Fatal("a cancellation without requestId was read")
	}
}

func TestIDs_IntAndStringDiffer(t *testing.T) {
	if IntID(1) == StringID("1") {
		t.Fatal("1 and \"1\" are one id")
	}
	if IntID(1) != IntID(1) {
		t.Fatal("ids are not comparable")
	}
}

func FuzzSetMember(f *testing.F) {
	f.Add([]byte(`{"a":1}`), []byte(`"v"`))
	f.Add([]byte(`{"_meta":{"x":[1,2]}}`), []byte(`1`))
	f.Fuzz(func(t *testing.T, obj, value []byte) {
		if !json.Valid(value) {
			return
		}
		out, err := SetMember(obj, value, "_meta", "k")
		if err != nil {
			return
		}
		var back struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("output is not an object: %s", out)
		}
		if _, ok := back.Meta["k"]; !ok {
			t.Fatalf("member not set: %s", out)
		}
	})
}
