package discovery_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/discovery"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A relay of messages (cvm proxy) records each tools/call when its answer
// comes back: a result as a success, an error as a failure, invalid
// arguments as nothing; other requests are not timed.
func TestHistoryConn_RecordsToolsCalls(t *testing.T) {
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	client, err := ct.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	server, err := st.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	defer server.Close()
	pk := nostr.Generate().Public()
	hist := discovery.OpenHistory(filepath.Join(t.TempDir(), "history.json"))
	conn := &discovery.HistoryConn{Connection: client, Server: pk, History: hist}

	exchange := func(id int64, method string, answer *jsonrpc.Error) {
		t.Helper()
		reqID, _ := jsonrpc.MakeID(float64(id))
		if err := conn.Write(ctx, &jsonrpc.Request{ID: reqID, Method: method, Params: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if _, err := server.Read(ctx); err != nil {
			t.Fatal(err)
		}
		resp := &jsonrpc.Response{ID: reqID, Result: json.RawMessage(`{}`)}
		if answer != nil {
			resp = &jsonrpc.Response{ID: reqID, Error: answer}
		}
		if err := server.Write(ctx, resp); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Read(ctx); err != nil {
			t.Fatal(err)
		}
	}
	exchange(1, "tools/call", nil)
	exchange(2, "tools/list", &jsonrpc.Error{Code: jsonrpc.CodeInternalError})
	exchange(3, "tools/call", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams})
	exchange(4, "tools/call", &jsonrpc.Error{Code: jsonrpc.CodeInternalError})

	rec := discovery.OpenHistory(hist.Path()).Get(pk) // saved as it went
	if len(rec.Calls) != 2 || !rec.Calls[0].OK || rec.Calls[1].OK {
		t.Fatalf("calls %+v: want a success, then a failure", rec.Calls)
	}
}
