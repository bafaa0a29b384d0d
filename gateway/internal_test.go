package gateway

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

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
