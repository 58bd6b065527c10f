package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/spf13/pflag"
)

// herald serve takes each of its settings from, in order of precedence: its flag on the
// command line, its environment variable (HERALD_ and the flag's name in capitals, dashes
// as underscores: --max-body is HERALD_MAX_BODY), the TOML file --config names (the key is
// the flag's name: max-body = 1048576), and its default. --print-config prints what
// that makes, as TOML a --config file accepts.

// envPrefix starts every environment variable of a flag.
const envPrefix = "HERALD_"

// envName is the environment variable of the flag name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// notInFile are the flags a configuration file cannot set: the file's own name, and
// what the command does rather than how the server runs.
var notInFile = map[string]bool{"config": true, "print-config": true, "help": true}

// noEnv are the flags without an environment variable.
var noEnv = map[string]bool{"help": true}

// documentEnv appends each flag's environment variable to its usage, for --help.
func documentEnv(fl *pflag.FlagSet) {
	fl.VisitAll(func(f *pflag.Flag) {
		if !noEnv[f.Name] {
			f.Usage += " (env " + envName(f.Name) + ")"
		}
	})
}

// Where a flag's value came from, for --print-config.
const (
	fromDefault = "default"
	fromFlag    = "flag"
)

// applySources gives every flag of fl that the command line did not set the value of
// its environment variable (read through lookup) or, failing that, of its key in the
// configuration file (--config, or the file its environment variable names). It
// returns where each flag's value came from.
func applySources(fl *pflag.FlagSet, lookup func(string) (string, bool)) (map[string]string, error) {
	sources := map[string]string{}
	path := ""
	if f := fl.Lookup("config"); f != nil {
		path = f.Value.String()
		if v, ok := lookup(envName("config")); ok && !f.Changed {
			path = v
		}
	}
	file, err := readConfig(fl, path)
	if err != nil {
		return nil, err
	}
	var errs []error
	fl.VisitAll(func(f *pflag.Flag) {
		switch {
		case f.Changed:
			sources[f.Name] = fromFlag
		case !noEnv[f.Name] && has(lookup, envName(f.Name)):
			v, _ := lookup(envName(f.Name))
			if err := fl.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %v", envName(f.Name), v, err))
			}
			sources[f.Name] = envName(f.Name)
		case file[f.Name] != nil:
			if err := setFromFile(fl, f, file[f.Name]); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %v", path, f.Name, err))
			}
			sources[f.Name] = path
		default:
			sources[f.Name] = fromDefault
		}
	})
	return sources, errors.Join(errs...)
}

func has(lookup func(string) (string, bool), name string) bool {
	_, ok := lookup(name)
	return ok
}

// readConfig reads the TOML file at path ("" reads nothing): a flat table whose keys
// are flags of fl.
func readConfig(fl *pflag.FlagSet, path string) (map[string]any, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	var file map[string]any
	if _, err := toml.Decode(string(data), &file); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%s:%d:%d: %s", path, pe.Position.Line, pe.Position.Col, pe.Message)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var unknown []string
	for key := range file {
		if fl.Lookup(key) == nil || notInFile[key] {
			unknown = append(unknown, key)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("%s: no setting %s (the keys are herald serve's flags, such as listen = \"127.0.0.1:7420\"; see herald serve --help)", path, strings.Join(quoteAll(unknown), ", "))
	}
	return file, nil
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// setFromFile sets f from v, a value of the TOML file, which must be of f's kind.
func setFromFile(fl *pflag.FlagSet, f *pflag.Flag, v any) error {
	var s string
	switch kind := f.Value.Type(); kind {
	case "bool":
		b, ok := v.(bool)
		if !ok {
			return fmt.Errorf("want true or false, got %s", tomlKind(v))
		}
		s = strconv.FormatBool(b)
	case "int", "int64", "uint64":
		n, ok := v.(int64)
		if !ok {
			return fmt.Errorf("want an integer, got %s", tomlKind(v))
		}
		s = strconv.FormatInt(n, 10)
	case "float64":
		switch n := v.(type) {
		case float64:
			s = strconv.FormatFloat(n, 'g', -1, 64)
		case int64:
			s = strconv.FormatInt(n, 10)
		default:
			return fmt.Errorf("want a number, got %s", tomlKind(v))
		}
	case "stringSlice":
		list, ok := v.([]any)
		if str, isStr := v.(string); isStr {
			list, ok = []any{str}, true
		}
		if !ok {
			return fmt.Errorf("want a list of strings, got %s", tomlKind(v))
		}
		strs := make([]string, len(list))
		for i, x := range list {
			if strs[i], ok = x.(string); !ok {
				return fmt.Errorf("want a list of strings, got %s in it", tomlKind(x))
			}
		}
		s = strings.Join(strs, ",")
	default: // string, duration
		str, ok := v.(string)
		if !ok {
			if kind == "duration" {
				return fmt.Errorf("want a duration as a string, such as \"30s\", got %s", tomlKind(v))
			}
			return fmt.Errorf("want a string, got %s", tomlKind(v))
		}
		s = str
	}
	return fl.Set(f.Name, s)
}

// tomlKind names the kind of a decoded TOML value.
func tomlKind(v any) string {
	switch v.(type) {
	case bool:
		return "a boolean"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("a %T", v)
}

// printConfig writes the flags of fl as a TOML configuration file, in the order of
// their names, each setting that does not come from its default followed by a comment
// saying where it came from.
func printConfig(w io.Writer, fl *pflag.FlagSet, sources map[string]string) error {
	var out bytes.Buffer
	out.WriteString("# herald serve's configuration: flags over HERALD_* environment variables over\n# the --config file over the defaults.\n")
	var err error
	fl.VisitAll(func(f *pflag.Flag) {
		if notInFile[f.Name] || err != nil {
			return
		}
		var v any
		if v, err = typedValue(f); err != nil {
			return
		}
		var line []byte
		if line, err = toml.Marshal(map[string]any{f.Name: v}); err != nil {
			return
		}
		line = bytes.TrimRight(line, "\n")
		out.Write(line)
		if src := sources[f.Name]; src != "" && src != fromDefault {
			fmt.Fprintf(&out, " # %s", sourceLabel(src))
		}
		out.WriteByte('\n')
	})
	if err != nil {
		return err
	}
	_, err = w.Write(out.Bytes())
	return err
}

// sourceLabel says where a setting came from: its flag, an environment variable, or a
// file.
func sourceLabel(src string) string {
	if src == fromFlag {
		return "from its flag"
	}
	return "from " + src
}

// typedValue is f's value as the TOML file writes it.
func typedValue(f *pflag.Flag) (any, error) {
	s := f.Value.String()
	switch f.Value.Type() {
	case "bool":
		return strconv.ParseBool(s)
	case "int", "int64":
		return strconv.ParseInt(s, 10, 64)
	case "uint64":
		return strconv.ParseUint(s, 10, 64)
	case "float64":
		return strconv.ParseFloat(s, 64)
	case "stringSlice":
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			return append([]string{}, sv.GetSlice()...), nil
		}
	}
	return s, nil
}
