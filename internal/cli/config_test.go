package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/spf13/pflag"
)

// envMap is an environment for newServeCmdEnv.
type envMap map[string]string

func (e envMap) lookup(name string) (string, bool) { v, ok := e[name]; return v, ok }

// sample returns a value for f other than its default: as the TOML file writes it, and
// as its flag would be given. A flag of a type this does not know fails the test, so a
// new kind of flag gets its sample here and is tested like the others.
func sample(t *testing.T, f *pflag.Flag) (any, string) {
	t.Helper()
	switch f.Value.Type() {
	case "bool":
		b, _ := strconv.ParseBool(f.DefValue)
		return !b, strconv.FormatBool(!b)
	case "int", "int64":
		n, _ := strconv.ParseInt(f.DefValue, 10, 64)
		return n + 7, strconv.FormatInt(n+7, 10)
	case "uint64":
		n, _ := strconv.ParseUint(f.DefValue, 10, 64)
		return int64(n + 7), strconv.FormatUint(n+7, 10)
	case "float64":
		x, _ := strconv.ParseFloat(f.DefValue, 64)
		return x + 0.25, strconv.FormatFloat(x+0.25, 'g', -1, 64)
	case "duration":
		d, _ := time.ParseDuration(f.DefValue)
		return (d + 3*time.Second).String(), (d + 3*time.Second).String()
	case "string":
		return "x-" + f.Name, "x-" + f.Name
	case "stringSlice":
		return []string{"Alpha", "Beta"}, "Alpha,Beta"
	}
	t.Fatalf("--%s is a %s flag, which this test has no sample for: add one", f.Name, f.Value.Type())
	return nil, ""
}

// want is what f shows after it was given s on the command line.
func want(t *testing.T, name, s string) string {
	t.Helper()
	fl := newServeCmdEnv(envMap{}.lookup).Flags()
	if err := fl.Set(name, s); err != nil {
		t.Fatalf("--%s %s: %v", name, s, err)
	}
	return fl.Lookup(name).Value.String()
}

// TestEveryServeFlagFromFileAndEnv walks herald serve's flag set — so a flag added
// later is covered without a change here — and sets every flag from a --config file,
// then from its environment variable, and checks the value it takes.
func TestEveryServeFlagFromFileAndEnv(t *testing.T) {
	file := map[string]any{}
	env := envMap{}
	wants := map[string]string{}
	var names []string
	newServeCmdEnv(envMap{}.lookup).Flags().VisitAll(func(f *pflag.Flag) {
		v, s := sample(t, f)
		names = append(names, f.Name)
		wants[f.Name] = want(t, f.Name, s)
		if !notInFile[f.Name] {
			file[f.Name] = v
		}
		if f.Name != "config" { // its own test below: it names a file to read
			env[envName(f.Name)] = s
		}
	})
	if len(names) < 30 {
		t.Fatalf("herald serve has %d flags: %v", len(names), names)
	}
	path := filepath.Join(t.TempDir(), "herald.toml")
	data, err := toml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("file", func(t *testing.T) {
		cmd := newServeCmdEnv(envMap{}.lookup)
		if err := cmd.ParseFlags([]string{"--config", path}); err != nil {
			t.Fatal(err)
		}
		sources, err := applySources(cmd.Flags(), envMap{}.lookup)
		if err != nil {
			t.Fatal(err)
		}
		for name := range file {
			if got := cmd.Flags().Lookup(name).Value.String(); got != wants[name] || sources[name] != path {
				t.Errorf("%s in the file: %s from %s, want %s", name, got, sources[name], wants[name])
			}
		}
	})
	t.Run("env", func(t *testing.T) {
		cmd := newServeCmdEnv(env.lookup)
		sources, err := applySources(cmd.Flags(), env.lookup)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if name == "config" {
				continue
			}
			if got := cmd.Flags().Lookup(name).Value.String(); got != wants[name] || sources[name] != envName(name) {
				t.Errorf("%s: %s from %s, want %s", envName(name), got, sources[name], wants[name])
			}
		}
	})
}

// TestServeSettingsPrecedence: a flag wins over its environment variable, the
// variable over the --config file, the file over the default; --config wins over
// HERALD_CONFIG, which names the file when --config is absent.
func TestServeSettingsPrecedence(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	main := write("main.toml", "listen = \"127.0.0.1:9001\"\nlog-level = \"debug\"\nretention = 5\ndeny-watch = [\"Secret\"]\n")
	other := write("other.toml", "listen = \"127.0.0.1:9002\"\n")
	env := envMap{"HERALD_LOG_LEVEL": "warn", "HERALD_RETENTION": "6", "HERALD_CONFIG": other}

	run := func(args ...string) (*pflag.FlagSet, map[string]string) {
		t.Helper()
		cmd := newServeCmdEnv(env.lookup)
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		sources, err := applySources(cmd.Flags(), env.lookup)
		if err != nil {
			t.Fatal(err)
		}
		return cmd.Flags(), sources
	}
	fl, sources := run("--config", main, "--retention", "7")
	for name, w := range map[string][2]string{
		"listen":     {"127.0.0.1:9001", main},
		"deny-watch": {"[Secret]", main},
		"log-level":  {"warn", "HERALD_LOG_LEVEL"},
		"retention":  {"7", fromFlag},
		"max-body":   {"1048576", fromDefault},
	} {
		if got := fl.Lookup(name).Value.String(); got != w[0] || sources[name] != w[1] {
			t.Errorf("%s = %s from %s, want %s from %s", name, got, sources[name], w[0], w[1])
		}
	}
	fl, sources = run()
	if got := fl.Lookup("listen").Value.String(); got != "127.0.0.1:9002" || sources["listen"] != other {
		t.Errorf("listen with HERALD_CONFIG: %s from %s", got, sources["listen"])
	}
	if got := fl.Lookup("retention").Value.String(); got != "6" {
		t.Errorf("retention from HERALD_RETENTION: %s", got)
	}
}

// TestServeHelpNamesEveryEnvVar: herald serve --help gives every flag's environment
// variable on the flag's line.
func TestServeHelpNamesEveryEnvVar(t *testing.T) {
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"serve", "--help"}, strings.NewReader(""), &out, &out); err != nil {
		t.Fatal(err)
	}
	_, flags, ok := strings.Cut(out.String(), "\nFlags:\n")
	if !ok {
		t.Fatalf("--help has no Flags section:\n%s", out.String())
	}
	lines := strings.Split(flags, "\n")
	n := 0
	newServeCmd().Flags().VisitAll(func(f *pflag.Flag) {
		n++
		for _, line := range lines {
			field := strings.TrimPrefix(strings.TrimSpace(line), "-h, ")
			if strings.HasPrefix(field, "--"+f.Name+" ") {
				if !strings.Contains(line, "(env "+envName(f.Name)+")") {
					t.Errorf("--help shows --%s without (env %s): %s", f.Name, envName(f.Name), line)
				}
				return
			}
		}
		t.Errorf("--help does not show --%s", f.Name)
	})
	if n < 30 {
		t.Fatalf("%d flags", n)
	}
}

// TestPrintConfig: --print-config prints every setting as TOML that --config reads back
// to the same settings, says where each one that is not a default came from, and starts
// no server.
func TestPrintConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herald.toml")
	if err := os.WriteFile(path, []byte("listen = \"127.0.0.1:9001\"\ndeny-watch = [\"Secret\", \"Audit\"]\nwatch-cpu = 0.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	print := func(env envMap, args ...string) string {
		t.Helper()
		cmd := newServeCmdEnv(env.lookup)
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs(append(args, "--print-config"))
		if err := cmd.ExecuteContext(context.Background()); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	first := print(envMap{"HERALD_TICK": "manual"}, "--config", path, "--retention", "9")
	for _, w := range []string{
		"listen = \"127.0.0.1:9001\" # from " + path + "\n",
		"deny-watch = [\"Secret\", \"Audit\"] # from " + path + "\n",
		"watch-cpu = 0.5 # from " + path + "\n",
		"tick = \"manual\" # from HERALD_TICK\n",
		"retention = 9 # from its flag\n",
		"max-body = 1048576\n",
		"body-timeout = \"30s\"\n",
	} {
		if !strings.Contains(first, w) {
			t.Errorf("--print-config lacks %q:\n%s", w, first)
		}
	}
	var settings map[string]any
	if _, err := toml.Decode(first, &settings); err != nil {
		t.Fatalf("--print-config does not parse as TOML: %v\n%s", err, first)
	}
	newServeCmd().Flags().VisitAll(func(f *pflag.Flag) {
		if _, ok := settings[f.Name]; !ok && !notInFile[f.Name] {
			t.Errorf("--print-config lacks %s", f.Name)
		}
	})
	// Read back, it makes the same settings.
	again := filepath.Join(t.TempDir(), "again.toml")
	if err := os.WriteFile(again, []byte(first), 0o644); err != nil {
		t.Fatal(err)
	}
	strip := func(s string) string {
		var b strings.Builder
		for _, line := range strings.Split(s, "\n") {
			if line, _, _ = strings.Cut(line, " # "); !strings.HasPrefix(line, "#") {
				b.WriteString(line + "\n")
			}
		}
		return b.String()
	}
	if second := print(envMap{}, "--config", again); strip(second) != strip(first) {
		t.Errorf("read back, the settings differ:\n%s\nagainst\n%s", second, first)
	}
}

// TestServeSettingsErrors: a file or variable herald serve cannot use stops it with a
// usage error (exit status 2) that names the file and key, or the variable.
func TestServeSettingsErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		file string
		env  envMap
		want string
	}{
		{file: "listn = \"127.0.0.1:1\"\n", want: `no setting "listn"`},
		{file: "config = \"x.toml\"\n", want: `no setting "config"`},
		{file: "listen = 7420\n", want: "listen: want a string, got an integer"},
		{file: "auth = \"yes\"\n", want: "auth: want true or false, got a string"},
		{file: "body-timeout = 30\n", want: "body-timeout: want a duration as a string"},
		{file: "max-body = 1.5\n", want: "max-body: want an integer, got a float"},
		{file: "deny-watch = [1]\n", want: "deny-watch: want a list of strings"},
		{file: "[server]\nlisten = \"x\"\n", want: `no setting "server"`},
		{file: "listen = \n", want: "herald.toml:1:"},
		{file: "retention = -1\n", want: "retention: invalid argument"},
		{env: envMap{"HERALD_MAX_BODY": "lots"}, want: `HERALD_MAX_BODY="lots"`},
		{env: envMap{"HERALD_CONFIG": filepath.Join(dir, "missing.toml")}, want: "missing.toml: no such file"},
		{env: envMap{"HERALD_LOG_LEVEL": "loud"}, want: `--log-level "loud"`},
	} {
		var args []string
		if tc.file != "" {
			p := filepath.Join(dir, "herald.toml")
			if err := os.WriteFile(p, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			args = []string{"--config", p}
		}
		cmd := newServeCmdEnv(tc.env.lookup)
		cmd.SetArgs(append(args, "--print-config"))
		cmd.SetOut(&bytes.Buffer{})
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		err := cmd.ExecuteContext(context.Background())
		if err == nil || ExitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q %v: %v (exit %d), want %q", tc.file, tc.env, err, ExitCode(err), tc.want)
		}
	}
}
