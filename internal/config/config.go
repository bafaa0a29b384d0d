package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/spf13/pflag"
)

// Source says which layer a setting's value came from.
type Source string

const (
	Default Source = "default"
	File    Source = "file"
	Env     Source = "env"
	Flag    Source = "flag"
)

// Setting is one resolved value and its provenance.
type Setting struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Source Source `json:"source"`
	// Origin is the file path, the environment variable or the flag name the
	// value was read from; empty for defaults.
	Origin string `json:"origin,omitempty"`
}

// annotation is the pflag annotation that carries a flag's config key.
const annotation = "cvm/config-key"

// Bind marks flag name of fs as settable from the config file and the
// environment under key.
func Bind(fs *pflag.FlagSet, name, key string) {
	if err := fs.SetAnnotation(name, annotation, []string{key}); err != nil {
		panic(fmt.Sprintf("config.Bind: %v", err)) // a programming error: the flag does not exist
	}
}

// EnvName is the environment variable for a config key.
func EnvName(key string) string {
	r := strings.NewReplacer(".", "_", "-", "_")
	return "CVM_" + strings.ToUpper(r.Replace(key))
}

// Dir is the directory holding config.toml and the default key file:
// $XDG_CONFIG_HOME/cvm, else ~/.config/cvm (Linux and BSD),
// ~/Library/Application Support/cvm (macOS) or %AppData%\cvm (Windows).
// getenv is os.Getenv outside tests.
func Dir(getenv func(string) string) (string, error) {
	return userDir(getenv, "XDG_CONFIG_HOME", "AppData", ".config", "Library/Application Support")
}

// DataDir is where cvm keeps data such as the relay database:
// $XDG_DATA_HOME/cvm, else ~/.local/share/cvm (Linux and BSD),
// ~/Library/Application Support/cvm (macOS) or %LocalAppData%\cvm (Windows).
func DataDir(getenv func(string) string) (string, error) {
	return userDir(getenv, "XDG_DATA_HOME", "LocalAppData", ".local/share", "Library/Application Support")
}

// CacheDir is where cvm keeps disposable state: $XDG_CACHE_HOME/cvm, else
// ~/.cache/cvm (Linux and BSD), ~/Library/Caches/cvm (macOS) or
// %LocalAppData%\cvm\cache (Windows).
func CacheDir(getenv func(string) string) (string, error) {
	d, err := userDir(getenv, "XDG_CACHE_HOME", "LocalAppData", ".cache", "Library/Caches")
	if err == nil && runtime.GOOS == "windows" && getenv("XDG_CACHE_HOME") == "" {
		d = filepath.Join(d, "cache")
	}
	return d, err
}

func userDir(getenv func(string) string, xdg, winVar, unixRel, macRel string) (string, error) {
	if d := getenv(xdg); d != "" {
		return filepath.Join(d, "cvm"), nil
	}
	if runtime.GOOS == "windows" {
		if d := getenv(winVar); d != "" {
			return filepath.Join(d, "cvm"), nil
		}
		return "", fmt.Errorf("cannot find a user directory: set %s or %s", xdg, winVar)
	}
	home := getenv("HOME")
	if home == "" {
		return "", fmt.Errorf("cannot find a user directory: set %s or HOME", xdg)
	}
	if runtime.GOOS == "darwin" {
		return filepath.Join(home, filepath.FromSlash(macRel), "cvm"), nil
	}
	return filepath.Join(home, filepath.FromSlash(unixRel), "cvm"), nil
}

// FileValues is a parsed config file, flattened to dotted keys.
type FileValues struct {
	Path   string
	values map[string]any
}

// Load reads the TOML file at path. A missing file is not an error: it
// yields no values.
func Load(path string) (*FileValues, error) {
	f := &FileValues{Path: path, values: map[string]any{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	flatten("", raw, f.values)
	return f, nil
}

func flatten(prefix string, in map[string]any, out map[string]any) {
	for k, v := range in {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		if m, ok := v.(map[string]any); ok {
			flatten(key, m, out)
			continue
		}
		out[key] = v
	}
}

// Lookup returns the value at key, if the file has one.
func (f *FileValues) Lookup(key string) (any, bool) {
	v, ok := f.values[key]
	return v, ok
}

// Table returns the string values of a TOML table, such as [servers].
func (f *FileValues) Table(name string) map[string]string {
	out := map[string]string{}
	for k, v := range f.values {
		if rest, ok := strings.CutPrefix(k, name+"."); ok {
			if s, ok := v.(string); ok {
				out[rest] = s
			}
		}
	}
	return out
}

// Keys returns every key the file sets, sorted.
func (f *FileValues) Keys() []string {
	keys := make([]string, 0, len(f.values))
	for k := range f.values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Apply fills every bound flag of fs that was not given on the command line
// from the environment (getenv) or else from the file, and returns the
// resolved settings of all bound flags.
func Apply(fs *pflag.FlagSet, file *FileValues, getenv func(string) string) ([]Setting, error) {
	var settings []Setting
	var errs []error
	fs.VisitAll(func(fl *pflag.Flag) {
		keys := fl.Annotations[annotation]
		if len(keys) == 0 {
			return
		}
		key := keys[0]
		s := Setting{Key: key, Source: Default}
		switch {
		case fl.Changed:
			s.Source, s.Origin = Flag, "--"+fl.Name
		case getenv(EnvName(key)) != "":
			s.Source, s.Origin = Env, EnvName(key)
			if err := set(fl, splitEnv(fl, getenv(EnvName(key)))); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", EnvName(key), err))
			}
		default:
			v, ok := file.Lookup(key)
			if !ok {
				break
			}
			s.Source, s.Origin = File, file.Path
			vals, err := fileStrings(v)
			if err == nil {
				err = set(fl, vals)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: key %q: %w", file.Path, key, err))
			}
		}
		s.Value = display(fl)
		settings = append(settings, s)
	})
	return settings, errors.Join(errs...)
}

func display(fl *pflag.Flag) string {
	if sv, ok := fl.Value.(pflag.SliceValue); ok {
		return strings.Join(sv.GetSlice(), ",")
	}
	return fl.Value.String()
}

func splitEnv(fl *pflag.Flag, v string) []string {
	if _, ok := fl.Value.(pflag.SliceValue); ok {
		parts := strings.Split(v, ",")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		return parts
	}
	return []string{v}
}

func set(fl *pflag.Flag, vals []string) error {
	if sv, ok := fl.Value.(pflag.SliceValue); ok {
		return sv.Replace(vals)
	}
	if len(vals) != 1 {
		return fmt.Errorf("want a single value, got a list of %d", len(vals))
	}
	if err := fl.Value.Set(vals[0]); err != nil {
		return fmt.Errorf("invalid value %q for %s: %w", vals[0], fl.Value.Type(), err)
	}
	return nil
}

// fileStrings converts a decoded TOML value to the strings a flag parses.
func fileStrings(v any) ([]string, error) {
	switch v := v.(type) {
	case string:
		return []string{v}, nil
	case bool, int64, float64:
		return []string{fmt.Sprint(v)}, nil
	case time.Duration:
		return []string{v.String()}, nil
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			s, err := fileStrings(e)
			if err != nil {
				return nil, err
			}
			if len(s) != 1 {
				return nil, errors.New("nested lists are not supported")
			}
			out = append(out, s[0])
		}
		return out, nil
	default:
		return nil, fmt.Errorf("unsupported value of type %T", v)
	}
}
