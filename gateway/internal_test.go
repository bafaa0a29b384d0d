package gateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestWithMember_KeepsEverythingElse(t *testing.T) {
	for _, tc := range []struct {
		params string
		value  any
		path   []string
		want   string
	}{
		{`{"name":"x","_meta":{"progressToken":1,"other":true}}`, "g-1", []string{"_meta", "progressToken"}, `{"_meta":{"other":true,"progressToken":"g-1"},"name":"x"}`},
		{`{"name":"x"}`, "g-2", []string{"_meta", "progressToken"}, `{"_meta":{"progressToken":"g-2"},"name":"x"}`},
		{`{"progressToken":"g-3","progress":1}`, 7, []string{"progressToken"}, `{"progress":1,"progressToken":7}`},
		{``, 3, []string{"requestId"}, `{"requestId":3}`},
	} {
		got, err := withMember(json.RawMessage(tc.params), tc.value, tc.path...)
		if err != nil || string(got) != tc.want {
			t.Errorf("withMember(%s, %v, %v) = %s, %v; want %s", tc.params, tc.value, tc.path, got, err, tc.want)
		}
	}
	if _, err := withMember(json.RawMessage(`[1]`), 1, "x"); err == nil {
		t.Error("params that are not an object were accepted")
	}
}

func TestProgressToken(t *testing.T) {
	for params, want := range map[string]any{
		`{"_meta":{"progressToken":"a"}}`:  "a",
		`{"progressToken":2,"progress":1}`: float64(2),
		`{"name":"x"}`:                     nil,
	} {
		got, ok := progressToken(json.RawMessage(params))
		if got != want || ok != (want != nil) {
			t.Errorf("progressToken(%s) = %v, %v", params, got, ok)
		}
	}
	if tokenKey(1.0) == tokenKey("1") {
		t.Error("the number 1 and the string \"1\" are one token")
	}
}

func TestReadEvents(t *testing.T) {
	stream := "id: 1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n" +
		": a comment\n\n" +
		"event: ping\ndata: {}\n\n" +
		"id: 2\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n" +
		"id: 3\ndata: not json\n\n"
	var got []string
	lastID := ""
	err := readEvents(strings.NewReader(stream), &lastID, func(m jsonrpc.Message) { got = append(got, m.(*jsonrpc.Request).Method) })
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "notifications/tools/list_changed,notifications/message" || lastID != "3" {
		t.Fatalf("messages %v, last id %q", got, lastID)
	}
}

func TestDescribeEnd(t *testing.T) {
	if err := describeEnd(nil, nil); !strings.Contains(err.Error(), "upstream MCP server closed the connection") {
		t.Errorf("%v", err)
	}
}
