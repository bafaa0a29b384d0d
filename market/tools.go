package market

import "github.com/modelcontextprotocol/go-sdk/mcp"

// addTools registers the market's tools.
func (m *Market) addTools() {
	mcp.AddTool(m.server, &mcp.Tool{Name: "search", Description: "Find tools in the ContextVM marketplace: by words, common schema hash, category or maximum price. " +
		"Each offer has its server (npub), price, common schema, reputation and why it ranks where it does, best first."}, m.search)
	mcp.AddTool(m.server, &mcp.Tool{Name: "describe", Description: "Describe a server (its tools with input schemas and prices) or a common schema (its providers, best first)."}, m.describe)
	mcp.AddTool(m.server, &mcp.Tool{Name: "call", Description: "Call a tool on a server, or on the best provider of a common schema (trust, then reputation, then price; " +
		"failing over to the next). A priced call is paid within the user's budget; the result's _meta[\"" + MetaKey + "\"] says who answered and what was paid."}, m.call)
	mcp.AddTool(m.server, &mcp.Tool{Name: "budget", Description: "What the market spent today, per server, and what is left of the budget."}, m.budget)
}
