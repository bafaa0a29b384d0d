// Package config resolves cvm's settings from, in increasing precedence, the
// built-in defaults, the config.toml file, CVM_* environment variables and
// command-line flags, and remembers where each value came from so that
// `cvm config` can show it.
//
// A flag takes part when it is annotated with its configuration key (Bind).
// The key is a dotted path into the TOML file ("relay.listen" is the listen
// key of the [relay] table) and names the environment variable too:
// CVM_RELAY_LISTEN. List values are TOML arrays in the file and
// comma-separated in the environment.
//
// Files: config.go holds it all, being one concept: Bind, the directories
// (Dir, DataDir, CacheDir), Load of the file and Apply of the layers, which
// gives each Setting with its Source.
package config
