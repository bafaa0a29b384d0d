package commonschema

import (
	"encoding/json"

	"github.com/google/jsonschema-go/jsonschema"
)

// ValidateArguments checks a tool call's arguments against the tool's
// input schema, so that a mistake is reported by the caller, with the
// schema's words, before anything is sent (or paid for). A schema this
// validator cannot read is left to the server: nil.
func ValidateArguments(args map[string]any, inputSchema any) error {
	raw, err := json.Marshal(inputSchema)
	if err != nil {
		return nil
	}
	var schema jsonschema.Schema
	if json.Unmarshal(raw, &schema) != nil {
		return nil
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		return nil
	}
	// Validate JSON values, as the server will see them.
	data, err := json.Marshal(args)
	if err != nil {
		return err
	}
	var instance map[string]any
	if err := json.Unmarshal(data, &instance); err != nil {
		return err
	}
	return resolved.Validate(instance)
}
