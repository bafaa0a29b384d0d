package gateway

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"fiatjaf.com/nostr"
)

// Access says which clients may use which capabilities. The zero value lets
// every client use everything.
//
// It is checked by the gateway on every request before the request reaches
// the upstream (for the shared upstream too, so a refused client learns
// nothing from it). The rules are the reference SDK's allowedPublicKeys and
// excludedCapabilities: when Allow is set, only those keys are served,
// except for the Public capabilities, which anyone may use; a client needs
// initialize and ping to reach those, so they are public whenever something
// is.
type Access struct {
	// Allow lists the clients served; empty serves everyone.
	Allow []nostr.PubKey
	// Public lists capabilities exempt from Allow.
	Public []Capability
}

// Capability names a method, optionally narrowed to one tool or prompt
// (by name) or resource (by URI).
type Capability struct {
	Method string
	Name   string
}

func (c Capability) String() string {
	if c.Name == "" {
		return c.Method
	}
	return c.Method + ":" + c.Name
}

// ParseCapability reads METHOD or METHOD:NAME, e.g. "tools/list" or
// "tools/call:get_weather". A resource URI may contain colons:
// "resources/read:file:///notes.txt".
func ParseCapability(s string) (Capability, error) {
	method, name, _ := strings.Cut(strings.TrimSpace(s), ":")
	if method == "" || strings.ContainsAny(method, " \t") || !strings.Contains(method, "/") && method != "ping" && method != "initialize" {
		return Capability{}, fmt.Errorf("capability %q: want METHOD[:NAME], e.g. tools/list or tools/call:get_weather", s)
	}
	return Capability{Method: method, Name: name}, nil
}

// Permits reports whether client may send a request for method with
// params.
func (a Access) Permits(client nostr.PubKey, method string, params json.RawMessage) bool {
	if len(a.Allow) == 0 || slices.Contains(a.Allow, client) {
		return true
	}
	if len(a.Public) > 0 && (method == "initialize" || method == "ping") {
		return true
	}
	for _, c := range a.Public {
		if c.Method == method && (c.Name == "" || c.Name == targetName(method, params)) {
			return true
		}
	}
	return false
}

// targetName is what a request acts on: the tool or prompt name, or the
// resource URI.
func targetName(method string, params json.RawMessage) string {
	switch method {
	case "tools/call", "prompts/get":
		return paramString(params, "name")
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		return paramString(params, "uri")
	}
	return ""
}
