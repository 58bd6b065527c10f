package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chzyer/readline"
	"github.com/spf13/cobra"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
)

type queryFlags struct {
	addr    string
	tls     tlsFlags
	execute string
	json    bool
	history string
	timeout time.Duration
}

func newQueryCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var f queryFlags
	cmd := &cobra.Command{
		Use:   "query",
		Short: "Run statements against a broker: an interactive shell, a script, or one-shot",
		Long: `Connect to a running broker and run statements.

On a terminal this opens an interactive shell with line editing and history (kept in
~/.herald_history). A statement may span lines and ends with ";". The shell holds one
server session, so BEGIN ... COMMIT may span several statements. Type \q or press
Ctrl-D to leave, \json to switch between tables and raw JSON.

With -e the statements run once and the command exits; a failure prints the error and
exits with status 1. When standard input is not a terminal, statements are read from it
and the command stops at the first error.`,
		Example: `  herald query
  herald query --addr http://10.0.0.5:7420
  herald query -e 'MATCH j: Job WHERE j.priority > 3 RETURN j.status, j.priority'
  herald query --json -e 'SPAWN j: Job { priority = 5 } RETURNING j'
  herald query < setup.hql`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runQuery(cmd.Context(), f, stdin, stdout, stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", defaultAddr(), "broker URL (default from $HERALD_ADDR when set)")
	addTLSFlags(fl, &f.tls)
	fl.StringVarP(&f.execute, "execute", "e", "", "run these statements and exit")
	fl.BoolVar(&f.json, "json", false, "print the raw JSON response instead of tables")
	fl.StringVar(&f.history, "history", defaultHistory(), "history file of the interactive shell; empty disables it")
	fl.DurationVar(&f.timeout, "timeout", time.Minute, "time limit of one request")
	return cmd
}

func defaultHistory() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".herald_history")
}

// shell runs statements and prints their outcome. It holds a server session (sess)
// when it reads statements from a terminal or a script, so that a transaction may span
// them; -e runs without one.
type shell struct {
	c      *client.Client
	sess   *client.Session
	addr   string
	json   bool
	stdout io.Writer
	stderr io.Writer
}

// run sends text and prints the response or the error; it returns the error.
func (sh *shell) run(ctx context.Context, text string) error {
	var (
		data json.RawMessage
		err  error
	)
	if sh.sess != nil {
		data, err = sh.sess.ExecJSON(ctx, text, nil)
	} else {
		data, err = sh.c.ExecJSON(ctx, text, nil)
	}
	if err != nil {
		sh.report(text, err)
		return err
	}
	if sh.json {
		_, err := sh.stdout.Write(append(bytes.TrimRight(data, "\n"), '\n'))
		return err
	}
	var resp queryResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		fmt.Fprintf(sh.stderr, "ERROR unreadable response: %v\n", err)
		return err
	}
	_, err = io.WriteString(sh.stdout, formatResponse(&resp))
	return err
}

// report prints the error of text: a Herald error by its code, with a caret under its
// position in text (and, with --json, also as the JSON API's error body on stdout);
// anything else, such as a connection that failed, as its text.
func (sh *shell) report(text string, err error) {
	var he *herald.Error
	if errors.As(err, &he) {
		if sh.json {
			fmt.Fprintln(sh.stdout, errorJSON(he))
		}
		io.WriteString(sh.stderr, formatError(text, he))
		return
	}
	fmt.Fprintf(sh.stderr, "ERROR %v\n", err)
}

func runQuery(ctx context.Context, f queryFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	addr := normalizeAddr(f.addr)
	sh := &shell{addr: addr, json: f.json, stdout: stdout, stderr: stderr}
	c, err := dial(ctx, addr, f.tls, f.timeout)
	var usage *ExitError
	switch {
	case errors.As(err, &usage):
		return err
	case err != nil && f.execute != "":
		sh.report(f.execute, err)
		return &ExitError{Code: 1, Err: err, Silent: true}
	case err != nil:
		return fmt.Errorf("cannot open a session on %s: %w", addr, err)
	}
	defer c.Close()
	sh.c = c
	if f.execute != "" {
		if err := sh.run(ctx, f.execute); err != nil {
			return &ExitError{Code: 1, Err: err, Silent: true}
		}
		return nil
	}
	if sh.sess, err = c.OpenSession(ctx); err != nil {
		return fmt.Errorf("cannot open a session on %s: %w", addr, err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = sh.sess.Close(ctx)
	}()
	if file, ok := stdin.(*os.File); ok && readline.IsTerminal(int(file.Fd())) {
		return sh.interactive(ctx, file, f.history)
	}
	return sh.script(ctx, stdin)
}

// script reads statements from r, sends each complete one, and stops at the first error.
func (sh *shell) script(ctx context.Context, r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var buf strings.Builder
	flush := func() error {
		text := buf.String()
		buf.Reset()
		if strings.TrimSpace(stripComments(text)) == "" {
			return nil
		}
		if err := sh.run(ctx, text); err != nil {
			return &ExitError{Code: 1, Err: err, Silent: true}
		}
		return nil
	}
	for sc.Scan() {
		buf.WriteString(sc.Text())
		buf.WriteByte('\n')
		if complete(buf.String()) {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return flush()
}

// stripComments removes -- comments so a buffer holding only comments is not sent.
func stripComments(text string) string {
	var b strings.Builder
	for _, line := range strings.Split(text, "\n") {
		if i := strings.Index(line, "--"); i >= 0 && !strings.ContainsAny(line[:i], `"'`) {
			line = line[:i]
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

const (
	prompt         = "herald> "
	continuePrompt = "     -> "
)

// interactive is the terminal shell: line editing, history, multi-line statements.
func (sh *shell) interactive(ctx context.Context, in *os.File, history string) error {
	rl, err := readline.NewEx(&readline.Config{
		Prompt:                 prompt,
		HistoryFile:            history,
		DisableAutoSaveHistory: true,
		HistorySearchFold:      true,
		InterruptPrompt:        "^C",
		Stdin:                  in,
		Stdout:                 sh.stdout,
		Stderr:                 sh.stderr,
	})
	if err != nil {
		return err
	}
	defer rl.Close()
	fmt.Fprintf(sh.stdout, "Connected to %s. End statements with ';'; \\q quits, \\json toggles JSON output.\n", sh.addr)
	var buf strings.Builder
	for ctx.Err() == nil {
		if buf.Len() == 0 {
			rl.SetPrompt(prompt)
		} else {
			rl.SetPrompt(continuePrompt)
		}
		line, err := rl.Readline()
		if errors.Is(err, readline.ErrInterrupt) {
			if buf.Len() == 0 {
				fmt.Fprintln(sh.stdout, `(\q or Ctrl-D to quit)`)
			}
			buf.Reset()
			continue
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if buf.Len() == 0 {
			switch strings.TrimSpace(line) {
			case "":
				continue
			case `\q`, "quit", "exit":
				return nil
			case `\json`:
				sh.json = !sh.json
				fmt.Fprintf(sh.stdout, "JSON output %s\n", map[bool]string{true: "on", false: "off"}[sh.json])
				continue
			case `\h`, `\?`, "help":
				fmt.Fprintln(sh.stdout, `End statements with ';'. \q quits, \json toggles JSON output, Ctrl-C clears the input.`)
				continue
			}
		}
		buf.WriteString(line)
		buf.WriteByte('\n')
		if !complete(buf.String()) {
			continue
		}
		text := strings.TrimRight(buf.String(), "\n")
		buf.Reset()
		// The history file is line-based: keep a multi-line statement as one entry.
		_ = rl.SaveHistory(strings.ReplaceAll(text, "\n", " "))
		_ = sh.run(ctx, text) // errors are printed; the shell goes on
	}
	return nil
}
