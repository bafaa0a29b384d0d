package main

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestProgressLine(t *testing.T) {
	for _, tc := range []struct {
		p    mcp.ProgressNotificationParams
		want string
	}{
		{mcp.ProgressNotificationParams{Progress: 3, Total: 3, Message: "counted 3"}, "progress 3/3: counted 3"},
		{mcp.ProgressNotificationParams{Progress: 0, Total: 5}, "progress 0/5"},
		{mcp.ProgressNotificationParams{Progress: 2}, "progress 2"},
		{mcp.ProgressNotificationParams{Progress: 2, Message: "half"}, "progress 2: half"},
		{mcp.ProgressNotificationParams{Message: "payment of 10 sats required for tool:add"}, "payment of 10 sats required for tool:add"},
	} {
		if got := progressLine(&tc.p); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.p, got, tc.want)
		}
	}
}
