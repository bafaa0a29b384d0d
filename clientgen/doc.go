// Package clientgen writes typed client code for an MCP server's tools,
// from the JSON Schemas of their inputs and outputs: a Go package over the
// cvm library (one method per tool on a Client that connects over Nostr
// with package contextvm, or over MCP streamable HTTP), and a TypeScript
// module over @contextvm/sdk and the official MCP SDK. `cvm gen` runs it.
//
// Schemas are typed as far as a type says what they say: objects with
// properties become structs (interfaces), required properties values and
// optional ones pointers with omitempty (optional members), arrays slices,
// string enums named types with constants (unions of literals), $ref to
// $defs, definitions or "#" named types, recursion included. What no type
// of the language says (oneOf, anyOf, allOf, a list of types, a $ref that
// is not followed) becomes json.RawMessage or any (unknown), with a
// comment that says why. Names are made ASCII identifiers; keywords,
// names the code declares itself and names that collide once made
// identifiers get a numeric suffix. Hostile schemas (deep nesting, huge
// enums, references in circles, names no identifier can spell) give code
// that compiles, typed more loosely past the limits in model.go, or an
// error: never invalid code (FuzzGenerateGo).
//
// Generated code records each tool's CEP-15 schema hash (package
// commonschema) in its header; Recorded reads them back and Compare says
// which tools of a live server have changed, appeared or gone since
// (`cvm gen --check`).
//
// Files: options.go (what a file is made of), model.go (schemas typed,
// language-neutral), names.go (identifiers and comments), golang.go (the Go
// writer), typescript.go (the TypeScript writer), check.go (the recorded
// hashes and Compare).
package clientgen
