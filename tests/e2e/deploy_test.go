package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// This file checks the deployment files: the Dockerfile and the systemd unit. Neither
// Docker nor systemd can run here, so the tests parse them and hold them to the rules
// that matter (a multi-stage build, a user without privileges, a data volume, a health
// check; a sandboxed unit), run the real binary with the settings they give it, and
// have systemd-analyze verify the unit where it is installed.

// dockerInstr is one instruction of a Dockerfile.
type dockerInstr struct {
	Cmd  string // FROM, RUN, …, upper case
	Args string
	Line int
}

// dockerInstructions are those Dockerfile knows.
var dockerInstructions = []string{"ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK",
	"LABEL", "MAINTAINER", "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR"}

// parseDockerfile reads the instructions of a Dockerfile: comments dropped, lines
// continued with a backslash joined.
func parseDockerfile(t *testing.T, path string) []dockerInstr {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []dockerInstr
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || trimmed == "" && cur.Len() == 0 {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if body, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		if !slices.Contains(dockerInstructions, strings.ToUpper(cmd)) {
			t.Errorf("%s:%d: unknown instruction %s", path, start, cmd)
		}
		out = append(out, dockerInstr{Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args), Line: start})
		cur.Reset()
	}
	if cur.Len() > 0 {
		t.Errorf("%s: the last instruction is continued past the end", path)
	}
	return out
}

// execForm decodes an instruction's JSON (exec) form, or fails.
func execForm(t *testing.T, in dockerInstr) []string {
	t.Helper()
	var argv []string
	if err := json.Unmarshal([]byte(in.Args), &argv); err != nil || len(argv) == 0 {
		t.Fatalf("Dockerfile:%d: %s %s is not in exec form (a JSON array): %v", in.Line, in.Cmd, in.Args, err)
	}
	return argv
}

// envPairs reads an ENV instruction's KEY=VALUE pairs.
func envPairs(args string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Fields(args) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = strings.Trim(v, `"`)
		}
	}
	return out
}

// dockerStage is one stage of a Dockerfile: FROM image AS name, and its instructions.
type dockerStage struct {
	name string
	from string
	ins  []dockerInstr
}

// dockerStages splits a Dockerfile's instructions into its stages, and returns the
// ARGs declared before the first.
func dockerStages(ins []dockerInstr) (stages []dockerStage, args map[string]string) {
	args = map[string]string{}
	for _, in := range ins {
		switch {
		case in.Cmd == "FROM":
			f := strings.Fields(in.Args)
			st := dockerStage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
			continue
		case len(stages) == 0 && in.Cmd == "ARG":
			k, v, _ := strings.Cut(in.Args, "=")
			args[k] = v
			continue
		}
		if len(stages) > 0 {
			stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
		}
	}
	return stages, args
}

// runtimeImage is what a Dockerfile's last stage sets.
type runtimeImage struct {
	env          map[string]string
	user, volume string
	exposed      []string
	healthcheck  []string          // the HEALTHCHECK's command, in exec form
	entrypoint   string            // the program of ENTRYPOINT
	copiesBinary string            // the stage the binary comes from
	chowned      map[string]string // COPY --chown: destination → owner
}

// readRuntime reads the runtime stage st; build is the name of the build stage.
func readRuntime(t *testing.T, st dockerStage, build string) runtimeImage {
	t.Helper()
	img := runtimeImage{env: map[string]string{}, chowned: map[string]string{}}
	for _, in := range st.ins {
		switch in.Cmd {
		case "USER":
			img.user = in.Args
		case "ENV":
			for k, v := range envPairs(in.Args) {
				img.env[k] = v
			}
		case "VOLUME":
			img.volume = in.Args
		case "EXPOSE":
			img.exposed = append(img.exposed, strings.Fields(in.Args)...)
		case "HEALTHCHECK":
			_, probe, ok := strings.Cut(in.Args, "CMD ")
			if !ok {
				t.Fatalf("Dockerfile:%d: HEALTHCHECK runs no command", in.Line)
			}
			img.healthcheck = execForm(t, dockerInstr{Cmd: in.Cmd, Args: probe, Line: in.Line})
		case "ENTRYPOINT":
			img.entrypoint = execForm(t, in)[0]
		case "COPY":
			if strings.Contains(in.Args, "--from="+build+" ") && strings.Contains(in.Args, "/herald ") {
				img.copiesBinary = build
			}
			if _, after, ok := strings.Cut(in.Args, "--chown="); ok {
				owner, _, _ := strings.Cut(after, " ")
				f := strings.Fields(in.Args)
				img.chowned[f[len(f)-1]] = owner
			}
		case "RUN":
			t.Errorf("Dockerfile:%d: the runtime stage runs a command (its image has no shell): %s", in.Line, in.Args)
		}
	}
	return img
}

// TestDockerfile holds the Dockerfile to its rules: a build stage and a runtime stage
// that copies only the binary from it; a static build of ./cmd/herald with the
// module's Go version; a user other than root; the data directory a volume owned by
// that user; the port of HERALD_LISTEN exposed; a HEALTHCHECK that runs herald
// health. The runtime stage's HERALD_* variables are settings herald serve accepts, and
// its health check passes against a server that runs with them.
func TestDockerfile(t *testing.T) {
	stages, args := dockerStages(parseDockerfile(t, docPath(t, "Dockerfile")))
	if len(stages) < 2 || stages[0].name == "" {
		t.Fatalf("the Dockerfile has %d stages, want a named build stage and a runtime stage", len(stages))
	}
	checkDockerBuild(t, stages[0], args)
	img := readRuntime(t, stages[len(stages)-1], stages[0].name)
	if img.copiesBinary == "" {
		t.Errorf("the runtime stage copies no herald binary from the build stage %q", stages[0].name)
	}
	if uid, _, _ := strings.Cut(img.user, ":"); uid == "" || uid == "0" || uid == "root" {
		t.Errorf("the runtime stage runs as %q: want a user without privileges", img.user)
	}
	data := img.env["HERALD_DATA"]
	if data == "" || !strings.Contains(img.volume, `"`+data+`"`) {
		t.Errorf("HERALD_DATA=%q is not a VOLUME (%s)", data, img.volume)
	}
	if img.chowned[data] != img.user {
		t.Errorf("the data directory %s is not made for the user %s (COPY --chown): %v", data, img.user, img.chowned)
	}
	if _, port, err := net.SplitHostPort(img.env["HERALD_LISTEN"]); err != nil || !slices.Contains(img.exposed, port) {
		t.Errorf("HERALD_LISTEN=%q, EXPOSE %v", img.env["HERALD_LISTEN"], img.exposed)
	}
	if len(img.healthcheck) == 0 || img.healthcheck[0] != img.entrypoint || !slices.Equal(img.healthcheck[1:], []string{"health"}) {
		t.Errorf("HEALTHCHECK runs %v, want %s health", img.healthcheck, img.entrypoint)
	}

	// The settings are herald serve's, and its health check passes against them.
	s := startServerEnv(t, img.env)
	check := exec.Command(binary, "health")
	check.Env = append(os.Environ(), "HERALD_ADDR="+s.URL())
	if out, err := check.CombinedOutput(); err != nil || string(out) != "ready\n" {
		t.Errorf("herald health: %v %s", err, out)
	}
}

// checkDockerBuild: the build stage uses go.mod's Go version and builds ./cmd/herald
// statically.
func checkDockerBuild(t *testing.T, build dockerStage, args map[string]string) {
	t.Helper()
	gomod, err := os.ReadFile(docPath(t, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(gomod)
	if goVersion == nil || args["GO_VERSION"] != string(goVersion[1]) || !strings.Contains(build.from, "${GO_VERSION}") {
		t.Errorf("the build stage's Go (ARG GO_VERSION=%s, FROM %s) is not go.mod's (%s)", args["GO_VERSION"], build.from, goVersion)
	}
	if !slices.ContainsFunc(build.ins, func(in dockerInstr) bool {
		return in.Cmd == "RUN" && strings.Contains(in.Args, "CGO_ENABLED=0") && strings.Contains(in.Args, "go build") && strings.Contains(in.Args, "./cmd/herald")
	}) {
		t.Error("no RUN builds ./cmd/herald with CGO_ENABLED=0 (the runtime image has no C library)")
	}
}

// startServerEnv starts herald serve with the environment env, on a free loopback
// port and a new data directory, and checks with --print-config that each variable is
// a setting it took.
func startServerEnv(t *testing.T, env map[string]string) interface{ URL() string } {
	t.Helper()
	var vars []string
	for k, v := range env {
		vars = append(vars, k+"="+v)
	}
	cmd := exec.Command(binary, "serve", "--print-config")
	cmd.Env = append(os.Environ(), vars...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("herald serve --print-config with %v: %v\n%s", vars, err, out)
	}
	for k := range env {
		if !strings.Contains(string(out), "# from "+k+"\n") {
			t.Errorf("%s is no setting of herald serve:\n%s", k, out)
		}
	}
	// The test's server runs with them, but for what its flags say (a free loopback
	// port, a new data directory), which win over the variables.
	for k, v := range env {
		t.Setenv(k, v)
	}
	return startServer(t, t.TempDir())
}

// unitFile is a systemd unit: its sections, each a list of key=value settings.
type unitFile map[string][][2]string

// parseUnit reads a systemd unit file: sections, keys and values, comments dropped,
// continued lines joined.
func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(f)
	n := 0
	var pending string
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if body, ok := strings.CutSuffix(line, "\\"); ok {
			pending += body + " "
			continue
		}
		line, pending = pending+line, ""
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = line[1 : len(line)-1]
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			t.Fatalf("%s:%d: not a setting of a section: %s", path, n, line)
		}
		u[section] = append(u[section], [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
	}
	return u
}

// get returns the values of key in section.
func (u unitFile) get(section, key string) []string {
	var out []string
	for _, kv := range u[section] {
		if kv[0] == key {
			out = append(out, kv[1])
		}
	}
	return out
}

// unitKeys are the settings the unit may use, so a misspelt one (systemd ignores it
// with a warning) fails the test.
var unitKeys = map[string][]string{
	"Unit":    {"Description", "Documentation", "After", "Wants", "Requires", "Before"},
	"Install": {"WantedBy"},
	"Service": {"Type", "ExecStart", "ExecReload", "Environment", "KillSignal", "TimeoutStopSec", "Restart", "RestartSec",
		"LimitNOFILE", "DynamicUser", "User", "Group", "StateDirectory", "StateDirectoryMode", "ConfigurationDirectory",
		"UMask", "NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices", "PrivateMounts",
		"PrivateUsers", "DevicePolicy", "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs",
		"ProtectControlGroups", "ProtectClock", "ProtectHostname", "ProtectProc", "ProcSubset",
		"RestrictAddressFamilies", "RestrictNamespaces", "RestrictRealtime", "RestrictSUIDSGID", "LockPersonality",
		"MemoryDenyWriteExecute", "RemoveIPC", "CapabilityBoundingSet", "AmbientCapabilities",
		"SystemCallArchitectures", "SystemCallFilter", "SystemCallErrorNumber"},
}

// TestSystemdUnit holds deploy/systemd/herald.service to its rules — known settings
// only, the hardening profile, a stop timeout longer than the server's drain, and the
// settings file it names (deploy/herald.toml) one herald serve accepts, with its data
// in the unit's state directory — and, where systemd-analyze is installed, has it
// verify the unit and rate its exposure.
func TestSystemdUnit(t *testing.T) {
	path := docPath(t, "deploy/systemd/herald.service")
	u := parseUnit(t, path)
	for section, kvs := range u {
		known, ok := unitKeys[section]
		if !ok {
			t.Errorf("unknown section [%s]", section)
		}
		for _, kv := range kvs {
			if !slices.Contains(known, kv[0]) {
				t.Errorf("[%s] %s: not a setting this unit is known to use (misspelt?)", section, kv[0])
			}
		}
	}
	for key, want := range map[string]string{
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
		"PrivateDevices": "yes", "DynamicUser": "yes", "StateDirectory": "herald", "CapabilityBoundingSet": "",
		"AmbientCapabilities": "", "RestrictSUIDSGID": "yes", "MemoryDenyWriteExecute": "yes",
		"ProtectKernelTunables": "yes", "ProtectKernelModules": "yes", "ProtectControlGroups": "yes",
		"RestrictNamespaces": "yes", "LockPersonality": "yes", "SystemCallArchitectures": "native",
	} {
		if got := u.get("Service", key); len(got) != 1 || got[0] != want {
			t.Errorf("[Service] %s = %v, want %q", key, got, want)
		}
	}
	if got := u.get("Service", "SystemCallFilter"); !slices.Contains(got, "@system-service") {
		t.Errorf("SystemCallFilter = %v, want @system-service", got)
	}
	if stop, err := time.ParseDuration(u.get("Service", "TimeoutStopSec")[0]); err != nil || stop <= 30*time.Second {
		t.Errorf("TimeoutStopSec %v (%v): want more than the server's 30 s drain", stop, err)
	}

	// ExecStart runs herald serve with the settings file the repository ships.
	exec0 := strings.Fields(u.get("Service", "ExecStart")[0])
	if len(exec0) != 4 || filepath.Base(exec0[0]) != "herald" || exec0[1] != "serve" || exec0[2] != "--config" {
		t.Fatalf("ExecStart = %v, want herald serve --config FILE", exec0)
	}
	cmd := exec.Command(binary, "serve", "--config", docPath(t, "deploy/herald.toml"), "--print-config")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("herald serve --config deploy/herald.toml: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `data = "/var/lib/`+u.get("Service", "StateDirectory")[0]+`" # from`) {
		t.Errorf("deploy/herald.toml keeps the data outside the unit's state directory:\n%s", out)
	}

	analyzeUnit(t, path, exec0[0])
}

// analyzeUnit has systemd-analyze verify the unit at path (with the built binary in
// place of its program) and rate its exposure, or skips where it is not installed.
func analyzeUnit(t *testing.T, path, program string) {
	t.Helper()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skipf("systemd-analyze is not installed; the unit was checked against the list of its settings only")
	}
	// verify needs the program to exist: the built binary stands in for it.
	unit, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "herald.service")
	if err := os.WriteFile(copyPath, []byte(strings.ReplaceAll(string(unit), program, binary)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, analyze, "verify", copyPath).CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// The exposure level, out of 10; 2.0 and below is what systemd calls OK.
	if out, err := exec.CommandContext(ctx, analyze, "security", "--offline=true", "--threshold=20", copyPath).CombinedOutput(); err != nil {
		t.Errorf("systemd-analyze security: %v\n%s", err, out)
	}
}
