package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/console"
	"github.com/herald-mq/herald/server"
	"github.com/herald-mq/herald/store/memstore"
)

// The browser test drives the console in Debian's chromium, headless, against a real
// server started in-process with authentication on. HERALD_UPDATE_DOCS=1 also writes
// the screenshots of docs/console/.

// chromium finds the browser, or skips the test saying it is not installed.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed (apt-get install chromium); the console's browser test needs it")
	return ""
}

// rig is the server, a client acting as "local" (loopback, every grant), the tokens of
// the principals the test made, and the browser.
type rig struct {
	t       *testing.T
	base    string
	c       *client.Client
	tokens  map[string]string
	browser context.Context
}

func newRig(t *testing.T) *rig {
	path := chromium(t)
	ctx := context.Background()
	s := server.New(server.Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Auth: true,
		StatsInterval: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	r := &rig{t: t, base: "http://" + s.Addr(), tokens: map[string]string{}}
	c, err := client.Dial(ctx, r.base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	r.c = c
	r.principal("operator", "admin")
	r.principal("nobody")

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 860), chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	// The first run starts the browser for the life of bctx (a run on a context with a
	// timeout would close it with that context).
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	r.browser = bctx
	return r
}

// in is the rig for a subtest.
func (r *rig) in(t *testing.T) *rig {
	c := *r
	c.t = t
	return &c
}

// answered waits for the page an action posted to: it says what was done or why not.
func answered() chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS("#done, #error"))
}

// principal makes a principal with grants and a token for it, through the API.
func (r *rig) principal(name string, grants ...string) {
	if grants == nil {
		grants = []string{}
	}
	r.api("PUT", "/v1/principals/"+name, map[string]any{"grants": grants}, nil)
	var tok struct{ Token string }
	r.api("POST", "/v1/tokens", map[string]any{"principal": name, "label": "console test"}, &tok)
	r.tokens[name] = tok.Token
}

func (r *rig) api(method, path string, body, out any) {
	r.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, r.base+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		r.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		_ = json.Unmarshal(raw, out)
	}
}

// do runs browser steps, failing the test with what failed.
func (r *rig) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.browser, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		r.t.Fatalf("%s: %v", what, err)
	}
}

// until waits for a JavaScript condition on the page.
func (r *rig) until(what, expr string) {
	r.t.Helper()
	r.do(what, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(50*time.Millisecond))(ctx, t)
		return err
	}))
}

// text is the text of the first element sel matches ("" when none does).
func (r *rig) text(sel string) string {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.browser, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {textContent: ""}).textContent`, sel)))
	if err != nil {
		r.t.Fatal(err)
	}
	return strings.TrimSpace(s)
}

// shot writes the page to docs/console/name.png under HERALD_UPDATE_DOCS=1.
func (r *rig) shot(name string) {
	r.t.Helper()
	if os.Getenv("HERALD_UPDATE_DOCS") == "" {
		return
	}
	ctx, cancel := context.WithTimeout(r.browser, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("..", "docs", "console", name+".png"), png, 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// count runs a COUNT statement as local.
func (r *rig) count(q string) int64 {
	r.t.Helper()
	resp, err := r.c.Exec(context.Background(), q, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	n, _ := resp.Last().Rows[0][0].(int64)
	return n
}

// deadLetters makes n dead letters of type typ: a group that rejects every message.
func (r *rig) deadLetters(typ string, n int) {
	r.t.Helper()
	ctx := context.Background()
	before := r.count(`MATCH d: _DeadLetter RETURN COUNT(d)`)
	sub, err := r.c.Subscribe(ctx, `WATCH m: `+typ+` [mode: consume, group: "rejects-`+typ+`"] RETURN m`,
		func(context.Context, *client.Message) error { return errors.New("refused") }, client.WithPolicy(client.RejectOnError))
	if err != nil {
		r.t.Fatal(err)
	}
	defer sub.Close(ctx)
	for i := range n {
		if _, err := r.c.Publish(ctx, typ, map[string]any{"n": i}); err != nil {
			r.t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); r.count(`MATCH d: _DeadLetter RETURN COUNT(d)`) < before+int64(n); {
		if time.Now().After(deadline) {
			r.t.Fatalf("%d messages of %s were not dead-lettered", n, typ)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestConsoleInChromium(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()

	// Sign in with the operator's token: the cookie carries it from then on.
	r.do("sign-in page", chromedp.Navigate(r.base+"/ui/login"), chromedp.WaitVisible(chromedp.CSS("#token")))
	r.shot("login")
	r.do("sign in", chromedp.SendKeys(chromedp.CSS("#token"), r.tokens["operator"]),
		chromedp.Submit(chromedp.CSS("#token")), chromedp.WaitVisible(chromedp.CSS("#role")))
	if role, who := r.text("#role"), r.text(".who"); role != "leader" || !strings.Contains(who, "operator") {
		t.Fatalf("overview: role %q, principal %q", role, who)
	}

	t.Run("live figures", func(t *testing.T) { liveFigures(r.in(t), ctx) })
	t.Run("streams and tail", func(t *testing.T) { streamsAndTail(r.in(t), ctx) })
	t.Run("query", func(t *testing.T) {
		r := r.in(t)
		r.do("query", chromedp.Navigate(r.base+"/ui/query"), chromedp.SetValue(chromedp.CSS("#statement"), "MATCH j: Job WHERE j.n >= 0 RETURN j.n, j.bad ORDER BY j.n"),
			chromedp.Click(chromedp.CSS("#run")), chromedp.WaitVisible(chromedp.CSS("#plan")))
		if plan := r.text("#plan"); !strings.Contains(plan, "scan Job") || r.text("#scanned") == "" {
			t.Fatalf("the query page shows %q", plan)
		}
		r.shot("query")
	})
	t.Run("dead letters", func(t *testing.T) { redriveOne(r.in(t)) })
	t.Run("purge and redrive all", func(t *testing.T) { purgeAndRedriveAll(r.in(t)) })
	t.Run("refusals", func(t *testing.T) { refusals(r.in(t)) })
}

// liveFigures: a consume group's figures on the queues page follow publishing and
// consuming without a reload, and its dead letters are counted.
func liveFigures(r *rig, ctx context.Context) {
	gate := make(chan struct{})
	sub, err := r.c.Subscribe(ctx, `WATCH j: Job [mode: consume, group: "workers"] RETURN j`, func(ctx context.Context, m *client.Message) error {
		<-gate
		if m.Match["bad"] == true {
			return errors.New("a bad job")
		}
		return nil
	}, client.WithPolicy(client.RejectOnError))
	if err != nil {
		r.t.Fatal(err)
	}
	defer sub.Close(ctx)
	r.do("queues", chromedp.Navigate(r.base+"/ui/queues"), chromedp.WaitVisible(chromedp.CSS("#group-workers")))
	fig := func(k string) string {
		return `document.querySelector('#group-workers [data-fig$=".` + k + `"]').textContent`
	}
	if got := r.text(`#group-workers [data-fig$=".messages"]`); got != "0" {
		r.t.Fatalf("messages before publishing: %q", got)
	}
	for i := range 4 {
		if _, err := r.c.Publish(ctx, "Job", map[string]any{"n": i, "bad": i%2 == 1}); err != nil {
			r.t.Fatal(err)
		}
	}
	r.until("4 messages shown", fig("messages")+` === "4"`)
	r.until("4 in flight shown", fig("in_flight")+` === "4"`)
	r.until("4 leased and none delayed, from the metrics", fig("leased")+` === "4" && `+fig("delayed")+` === "0"`)
	r.until("a sparkline drawn", `document.querySelector('#group-workers svg polyline') !== null`)
	r.shot("queues")
	close(gate)
	r.until("the queue drained", fig("messages")+` === "0" && `+fig("in_flight")+` === "0"`)
	r.until("2 dead letters counted", fig("dead_letters")+` === "2"`)
	r.until("2 acked and 2 dead-lettered, from the metrics", fig("acked")+` === "2" && `+fig("dead_lettered")+` === "2"`)
	r.do("overview", chromedp.Navigate(r.base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#role")))
	r.until("the overview counts the letters", `document.querySelector('[data-fig="dead_letters"]').textContent === "2"`+
		` && document.querySelector('svg[data-spark="seq"] polyline') !== null`)
	r.shot("overview")
}

// streamsAndTail: an open watch is listed with its position and lag, and the tail
// shows a publication as it commits.
func streamsAndTail(r *rig, ctx context.Context) {
	w, err := r.c.Watch(ctx, `WATCH j: Job WHERE j.n >= 0 RETURN j`)
	if err != nil {
		r.t.Fatal(err)
	}
	defer w.Close()
	r.do("streams", chromedp.Navigate(r.base+"/ui/streams"), chromedp.WaitVisible(chromedp.CSS("#streams")))
	r.until("the watch listed", `document.querySelector('#streams').textContent.includes('WATCH j: Job WHERE j.n >= 0')`)
	r.shot("streams")
	r.do("tail", chromedp.Navigate(r.base+"/ui/tail?pattern="+strings.ReplaceAll("WATCH j: Job RETURN j", " ", "+")),
		chromedp.WaitVisible(chromedp.CSS("#events")))
	r.until("the tail is live", `document.querySelector('#state').textContent === "live"`)
	if _, err := r.c.Publish(ctx, "Job", map[string]any{"n": 99, "bad": false}); err != nil {
		r.t.Fatal(err)
	}
	r.until("the tail shows the new job", `document.querySelector('#events').textContent.includes('"n":99')`)
	r.shot("tail")
}

// redriveOne: the dead-letter page lists both letters with their reason, group and
// original message, and a row's button redrives one.
func redriveOne(r *rig) {
	r.do("dead letters", chromedp.Navigate(r.base+"/ui/dead-letters"), chromedp.WaitVisible(chromedp.CSS("#total")))
	if n := r.text("#total"); !strings.HasPrefix(n, "2 dead letters") {
		r.t.Fatalf("the page says %q", n)
	}
	if reason, body, row := r.text(".letter .reason"), r.text(".letter pre"), r.text(".letter"); reason != "no_retry" ||
		!strings.Contains(body, `"bad":true`) || !strings.Contains(row, "workers") {
		r.t.Fatalf("a letter shows reason %q, message %q, row %q", reason, body, row)
	}
	r.shot("dead-letters")
	jobs := r.count(`MATCH j: Job RETURN COUNT(j)`)
	r.do("redrive one", chromedp.Click(chromedp.CSS(".letter .redrive-one")), answered())
	if done := r.text("#done"); done != "1 dead letter redriven" || !strings.HasPrefix(r.text("#total"), "1 dead letter matches") {
		r.t.Fatalf("after the redrive: %q, %q", done, r.text("#total"))
	}
	if got := r.count(`MATCH j: Job RETURN COUNT(j)`); got != jobs+1 {
		r.t.Fatalf("%d jobs after the redrive, want %d", got, jobs+1)
	}
}

// purgeAndRedriveAll: a selection is purged; every letter of a group is redriven, and
// every letter of a type purged, each through the filter and the form below the list.
func purgeAndRedriveAll(r *rig) {
	r.do("purge the selection", chromedp.Navigate(r.base+"/ui/dead-letters"), chromedp.WaitVisible(chromedp.CSS("#total")),
		chromedp.Click(chromedp.CSS("#select-all")), chromedp.Click(chromedp.CSS("#purge-selected")), answered())
	if done, total := r.text("#done"), r.text("#total"); done != "1 dead letter purged" || !strings.HasPrefix(total, "0 dead letters") {
		r.t.Fatalf("after purging the selection: %q %q (%s)", done, total, r.text("#error"))
	}
	r.deadLetters("Bad", 3)
	r.deadLetters("Worse", 2)
	r.do("redrive all of a group", chromedp.Navigate(r.base+"/ui/dead-letters?group=rejects-Bad"), chromedp.WaitVisible(chromedp.CSS("#total")),
		chromedp.Click(chromedp.CSS("#confirm-all")), chromedp.Click(chromedp.CSS("#redrive-all")), answered())
	if done := r.text("#done"); done != "3 dead letters redriven" || r.count(`MATCH b: Bad RETURN COUNT(b)`) != 3 {
		r.t.Fatalf("after redriving all of the group: %q (%s)", done, r.text("#error"))
	}
	r.do("purge all of Worse", chromedp.Navigate(r.base+"/ui/dead-letters?type=Worse"), chromedp.WaitVisible(chromedp.CSS("#total")),
		chromedp.Click(chromedp.CSS("#confirm-all")), chromedp.Click(chromedp.CSS("#purge-all")), answered())
	if done := r.text("#done"); done != "2 dead letters purged" || r.count(`MATCH d: _DeadLetter RETURN COUNT(d)`) != 0 {
		r.t.Fatalf("after purging all of Worse: %q (%s)", done, r.text("#error"))
	}
}

// refusals: a principal without grants gets the 403 page with E4013, in the browser
// and over HTTP; an unknown token gets the sign-in page with E4014.
func refusals(r *rig) {
	r.do("sign in as nobody", chromedp.Click(chromedp.CSS("#logout")), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), r.tokens["nobody"]), chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS("#error")))
	if e := r.text("#error .code"); e != "E4013" {
		r.t.Fatalf("nobody sees %q", r.text("#error"))
	}
	r.shot("forbidden")
	for token, want := range map[string]int{r.tokens["nobody"]: 403, "hrd_unknown": 401, r.tokens["operator"]: 200} {
		req, _ := http.NewRequest("GET", r.base+"/ui/queues", nil)
		req.AddCookie(&http.Cookie{Name: console.CookieName, Value: token})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			r.t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		code := map[int]string{403: "E4013", 401: "E4014", 200: "group-workers"}[want]
		if resp.StatusCode != want || !strings.Contains(string(body), code) {
			r.t.Errorf("a cookie for %.12s…: %d, want %d with %s", token, resp.StatusCode, want, code)
		}
	}
}
