package participant

import (
	"context"
	"fmt"
	"sort"

	"github.com/cvmgo/cvm/mcpx"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The optional chat tools of seed 001 §8.2.
const (
	ToolChatSay     = "chat.say"
	ToolPresenceGet = "presence.get"
)

// ChatSayArgs are chat.say's arguments.
type ChatSayArgs struct {
	Text   string `json:"text"`
	Format string `json:"format,omitempty"`
}

// ChatSayResult is chat.say's structured result: the chat envelope it
// broadcast.
type ChatSayResult struct {
	ID string `json:"id"`
}

// PresenceResult is presence.get's structured result, the same list as the
// gateway's participants endpoint: everyone present, this participant
// included, sorted by id.
type PresenceResult struct {
	Participants []mcpx.Participant `json:"participants"`
}

// chatSaySchema is written out rather than inferred from ChatSayArgs: the
// inferred one would allow any format and an empty text, and the go-sdk
// validates arguments against it before the handler runs, so that a call
// with a missing or mistyped text is a tool error, never a message.
var chatSaySchema = &jsonschema.Schema{
	Type: "object",
	Properties: map[string]*jsonschema.Schema{
		"text":   {Type: "string", MinLength: new(1), Description: "what to say"},
		"format": {Type: "string", Enum: []any{FormatPlain, FormatMarkdown}, Description: "plain (default) or markdown"},
	},
	Required: []string{"text"},
}

// AddRoomTools adds seed 001 §8.2's chat tools to s, served by c:
// chat.say broadcasts a chat message from this participant, and
// presence.get returns who is present. A Client's default server has them;
// a custom Server can add them once its Client is connected.
//
// chat.say lets any peer speak in this participant's name, as the spec
// intends; the resulting chat event names the caller (ChatMessage.SaidFor)
// so that a user sees who made them say it.
func AddRoomTools(s *mcp.Server, c *Client) {
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolChatSay,
		Description: "Say something in the room, as this participant: broadcasts a notifications/chat/message.",
		InputSchema: chatSaySchema,
	}, func(ctx context.Context, req *mcp.CallToolRequest, in ChatSayArgs) (*mcp.CallToolResult, ChatSayResult, error) {
		e, err := c.say(ctx, in.Text, in.Format, req.Session.ID())
		if err != nil {
			return nil, ChatSayResult{}, fmt.Errorf("chat.say: %w", err)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "said in " + c.opts.Topic}}}, ChatSayResult{ID: e.ID}, nil
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolPresenceGet,
		Description: "Who is in the room: every participant present, this one included, sorted by id.",
	}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, PresenceResult, error) {
		ps := append(c.Participants(), c.Self())
		sort.Slice(ps, func(i, j int) bool { return ps[i].ID < ps[j].ID })
		// No Content: the go-sdk then puts the JSON of the structured
		// result there too, for clients that read only content.
		return nil, PresenceResult{Participants: ps}, nil
	})
}
