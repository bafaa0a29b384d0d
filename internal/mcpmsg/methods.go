package mcpmsg

// MCP methods that relays of MCP messages treat specially (seed 002).
const (
	MethodInitialize       = "initialize"
	MethodInitialized      = "notifications/initialized"
	MethodPing             = "ping"
	MethodShutdown         = "shutdown" // seed 002; gone from MCP since 2024-11-05, still sent by some clients
	MethodCancelled        = "notifications/cancelled"
	MethodProgress         = "notifications/progress"
	MethodSubscribe        = "resources/subscribe"
	MethodUnsubscribe      = "resources/unsubscribe"
	MethodSetLevel         = "logging/setLevel"
	MethodLogMessage       = "notifications/message"
	MethodUpdated          = "notifications/resources/updated"
	MethodCreateMessage    = "sampling/createMessage"
	MethodElicit           = "elicitation/create"
	MethodRootsList        = "roots/list"
	MethodRootsChanged     = "notifications/roots/list_changed"
	MethodToolsChanged     = "notifications/tools/list_changed"
	MethodPromptsChanged   = "notifications/prompts/list_changed"
	MethodResourcesChanged = "notifications/resources/list_changed"
)

// ClientSide reports whether a request with this method is one a server
// sends to its client (sampling, elicitation, roots), so that it belongs to
// the receiver's client session with the sender, not to the receiver's own
// server.
func ClientSide(method string) bool {
	switch method {
	case MethodCreateMessage, MethodElicit, MethodRootsList:
		return true
	}
	return false
}

// ListChanged reports whether method is one of the list_changed
// notifications, which concern every client of a server.
func ListChanged(method string) bool {
	switch method {
	case MethodToolsChanged, MethodPromptsChanged, MethodResourcesChanged:
		return true
	}
	return false
}
