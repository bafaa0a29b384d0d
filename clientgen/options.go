package clientgen

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Tool is one tool as a server lists it (tools/list) or a common schema
// defines it.
type Tool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
}

// Source is where the tools came from: recorded in the code, and the
// defaults its client connects to.
type Source struct {
	// Name is the server's name, as it gave it (serverInfo.name).
	Name string
	// Server is its public key (npub), and Relays where it was reached.
	Server string
	Relays []string
	// URL is its MCP streamable HTTP endpoint.
	URL string
	// Schema is the common schema hash the tools were read from, when they
	// came from a schema rather than a server.
	Schema string
}

// describe names the source in a sentence.
func (s Source) describe() string {
	var parts []string
	switch {
	case s.Schema != "":
		parts = append(parts, "the servers of common schema "+s.Schema)
	case s.Server != "":
		parts = append(parts, "the ContextVM server "+s.Server)
	case s.URL != "":
		parts = append(parts, "the MCP server at "+s.URL)
	default:
		parts = append(parts, "an MCP server")
	}
	if s.Name != "" {
		parts = append(parts, fmt.Sprintf("(%s)", clip(s.Name, 80)))
	}
	return strings.Join(parts, " ")
}

// Options are what one generated file is made of.
type Options struct {
	// Package is the Go package name (default "client"); in TypeScript it
	// names the client class ("weather" → WeatherClient).
	Package string
	Source  Source
	Tools   []Tool
}
