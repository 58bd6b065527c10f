package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// System is one broker's row in a report: its results, or why it could not run.
type System struct {
	Name        string            `json:"name"`
	Durability  string            `json:"durability,omitempty"`
	Unavailable string            `json:"unavailable,omitempty"`
	Results     map[string]Result `json:"results,omitempty"`
}

// Report is one benchmark run over several systems.
type Report struct {
	Started   time.Time `json:"started"`
	Config    Config    `json:"config"`
	Scenarios []string  `json:"scenarios"`
	// Herald says how the Herald server ran: a separate process, in-process (for
	// profiling only) or a server given by URL.
	Herald string `json:"herald,omitempty"`
	// HeraldPG says how the Herald server on the PostgreSQL store (the herald-pg
	// system) ran, and on which database and schema.
	HeraldPG string   `json:"herald_pg,omitempty"`
	Systems  []System `json:"systems"`
}

// IsHerald reports whether a system of a report is a Herald server: "herald" (the
// embedded Pebble store) or "herald-" and its store, such as "herald-pg". Each Herald
// system's figures are set over every other system's as ratios.
func IsHerald(name string) bool { return name == "herald" || strings.HasPrefix(name, "herald-") }

// MarshalJSON encodes the workload without the Progress callback.
func (c Config) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Messages    int    `json:"messages"`
		PayloadSize int    `json:"payload_size"`
		InFlight    int    `json:"in_flight"`
		Consumers   int    `json:"consumers"`
		Prefetch    int    `json:"prefetch"`
		Rate        int    `json:"rate"`
		Duration    string `json:"duration"`
		Timeout     string `json:"timeout"`
		ProbeDir    string `json:"probe_dir,omitempty"`
		ProbeEvery  string `json:"probe_every,omitempty"`
	}{c.Messages, c.PayloadSize, c.InFlight, c.Consumers, c.Prefetch, c.Rate, c.Duration.String(), c.Timeout.String(),
		c.ProbeDir, probeEvery(c)})
}

func probeEvery(c Config) string {
	if c.ProbeDir == "" {
		return ""
	}
	return c.ProbeEvery.String()
}

// RunSystem runs scenarios against b, one after the other, and closes nothing.
func RunSystem(ctx context.Context, b Broker, scenarios []string, cfg Config) System {
	sys := System{Name: b.Name(), Durability: b.Durability(), Results: make(map[string]Result, len(scenarios))}
	for _, sc := range scenarios {
		if ctx.Err() != nil {
			break
		}
		sys.Results[sc] = Run(ctx, b, sc, cfg)
	}
	return sys
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteMarkdown writes the report as markdown: one table with a row per system and
// the columns of the scenarios that ran, then each system's durability setting, then
// the errors and violations, if any.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	cfg := r.Config
	fmt.Fprintf(&b, "Workload: %d B messages, %d confirmed publishes in flight, %d consumers with a prefetch of %d", cfg.PayloadSize, cfg.InFlight, cfg.Consumers, cfg.Prefetch)
	if r.has(S1) || r.has(S3) {
		fmt.Fprintf(&b, "; S1/S3: %d messages", cfg.Messages)
	}
	if r.has(S2) {
		fmt.Fprintf(&b, "; S2: %d msg/s offered for %v", cfg.Rate, cfg.Duration)
	}
	b.WriteString(".\n\n")
	if r.Herald != "" {
		fmt.Fprintf(&b, "Herald: %s.\n\n", r.Herald)
	}
	if r.HeraldPG != "" {
		fmt.Fprintf(&b, "Herald on PostgreSQL (herald-pg): %s.\n\n", r.HeraldPG)
	}

	head := []string{"system"}
	if r.has(S1) {
		head = append(head, "S1 publish msg/s", "S1 consume+ack msg/s")
	}
	if r.has(S2) {
		head = append(head, "S2 sent msg/s", "S2 p50", "S2 p99", "S2 max")
	}
	if r.has(S3) {
		head = append(head, "S3 nack+redeliver+ack", "S3 exactly once")
	}
	row(&b, head)
	sep := make([]string, len(head))
	sep[0] = "---"
	for i := 1; i < len(sep); i++ {
		sep[i] = "---:"
	}
	row(&b, sep)
	for _, s := range r.Systems {
		cells := []string{s.Name}
		if s.Unavailable != "" {
			cells[0] += " (unavailable)"
			for range len(head) - 1 {
				cells = append(cells, "—")
			}
			row(&b, cells)
			continue
		}
		if r.has(S1) {
			res, ok := s.Results[S1]
			cells = append(cells, figure(res, ok, fmtRate(res.PublishRate)), figure(res, ok, fmtRate(res.ConsumeRate)))
		}
		if r.has(S2) {
			res, ok := s.Results[S2]
			cells = append(cells, figure(res, ok, fmtRate(res.SentRate)), figure(res, ok, fmtDur(res.P50)),
				figure(res, ok, fmtDur(res.P99)), figure(res, ok, fmtDur(res.Max)))
		}
		if r.has(S3) {
			res, ok := s.Results[S3]
			verdict := "yes"
			if len(res.Violations) > 0 {
				verdict = fmt.Sprintf("**no** (%d)", len(res.Violations))
			}
			cells = append(cells, figure(res, ok, fmtDur(res.ConsumeTime)), figure(res, ok, verdict))
		}
		row(&b, cells)
	}

	r.writeRatios(&b)
	r.writeDisk(&b)
	r.writeStore(&b)
	r.writeCPU(&b)

	b.WriteString("\n| system | durability |\n|---|---|\n")
	for _, s := range r.Systems {
		d := s.Durability
		if s.Unavailable != "" {
			d = "unavailable: " + s.Unavailable
		}
		row(&b, []string{s.Name, d})
	}

	var notes []string
	for _, s := range r.Systems {
		for _, sc := range r.Scenarios {
			res, ok := s.Results[sc]
			if !ok {
				continue
			}
			if res.Err != "" {
				notes = append(notes, fmt.Sprintf("%s %s: %s", s.Name, strings.ToUpper(sc), res.Err))
			}
			for _, v := range res.Violations {
				notes = append(notes, fmt.Sprintf("%s %s violation: %s", s.Name, strings.ToUpper(sc), v))
			}
			if res.Duplicates > 0 && len(res.Violations) == 0 {
				notes = append(notes, fmt.Sprintf("%s %s: %d duplicate deliveries", s.Name, strings.ToUpper(sc), res.Duplicates))
			}
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (r *Report) has(sc string) bool {
	for _, s := range r.Scenarios {
		if s == sc {
			return true
		}
	}
	return false
}

// figure is a cell: the value, marked when the scenario failed.
func figure(res Result, ok bool, v string) string {
	switch {
	case !ok:
		return "—"
	case res.Err != "":
		return "error"
	}
	return v
}

func row(b *strings.Builder, cells []string) {
	b.WriteString("|")
	for _, c := range cells {
		b.WriteString(" ")
		b.WriteString(strings.ReplaceAll(c, "|", `\|`))
		b.WriteString(" |")
	}
	b.WriteString("\n")
}

func fmtRate(r float64) string {
	switch {
	case r >= 100:
		return fmt.Sprintf("%.0f", r)
	case r >= 10:
		return fmt.Sprintf("%.1f", r)
	}
	return fmt.Sprintf("%.2f", r)
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

// writeRatios writes each Herald system's figures over every other system's, from this
// run: above 1 means the Herald system is faster for rates, slower for latencies and
// times. A Herald system is set over the systems after it in the report that are not
// Herald, and over the Herald systems before it, so that "herald-pg ÷ herald" compares
// the PostgreSQL store with the Pebble one and no pair comes twice.
func (r *Report) writeRatios(b *strings.Builder) {
	type col struct {
		sc, name string
		get      func(Result) float64
	}
	var cols []col
	if r.has(S1) {
		cols = append(cols, col{S1, "S1 publish (higher is better)", func(x Result) float64 { return x.PublishRate }},
			col{S1, "S1 consume+ack (higher is better)", func(x Result) float64 { return x.ConsumeRate }})
	}
	if r.has(S2) {
		cols = append(cols, col{S2, "S2 p99 (lower is better)", func(x Result) float64 { return float64(x.P99) }})
	}
	if r.has(S3) {
		cols = append(cols, col{S3, "S3 time (lower is better)", func(x Result) float64 { return float64(x.ConsumeTime) }})
	}
	var rows [][]string
	for i := range r.Systems {
		h := &r.Systems[i]
		if !IsHerald(h.Name) || h.Unavailable != "" {
			continue
		}
		for j := range r.Systems {
			p := &r.Systems[j]
			if j == i || p.Unavailable != "" || IsHerald(p.Name) && j > i {
				continue
			}
			cells := []string{h.Name + " ÷ " + p.Name}
			for _, c := range cols {
				hr, hok := h.Results[c.sc]
				x, xok := p.Results[c.sc]
				if !hok || !xok || hr.Err != "" || x.Err != "" || c.get(x) == 0 {
					cells = append(cells, "—")
					continue
				}
				cells = append(cells, fmt.Sprintf("%.2f", c.get(hr)/c.get(x)))
			}
			rows = append(rows, cells)
		}
	}
	if len(rows) == 0 {
		return
	}
	head := []string{"ratio"}
	sep := []string{"---"}
	for _, c := range cols {
		head, sep = append(head, c.name), append(sep, "---:")
	}
	b.WriteString("\n")
	row(b, head)
	row(b, sep)
	for _, cells := range rows {
		row(b, cells)
	}
}

// writeCPU writes what S1's phases cost per message (CPU time and heap allocations) for
// the systems that run in the process.
func (r *Report) writeCPU(b *strings.Builder) {
	var rows [][]string
	for _, s := range r.Systems {
		res, ok := s.Results[S1]
		if !ok || res.Messages == 0 || res.PublishUse == nil || res.ConsumeUse == nil {
			continue
		}
		n := float64(res.Messages)
		cells := []string{s.Name}
		for _, u := range []*Use{res.PublishUse, res.ConsumeUse} {
			cells = append(cells, fmt.Sprintf("%.1f", float64(u.CPU.Microseconds())/n),
				fmt.Sprintf("%.1f", float64(u.Allocs)/n), fmt.Sprintf("%.1f", float64(u.AllocBytes)/n/1024))
		}
		rows = append(rows, cells)
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("\n| system (in-process: its server and the bench's clients), per message | S1 publish CPU µs | allocations | allocated KB | S1 consume+ack CPU µs | allocations | allocated KB |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, cells := range rows {
		row(b, cells)
	}
}

// writeDisk writes what the disk probe saw during each system's S2: a sync that
// stalls holds every broker that syncs before answering.
func (r *Report) writeDisk(b *strings.Builder) {
	var rows [][]string
	for _, s := range r.Systems {
		res, ok := s.Results[S2]
		if !ok || res.DiskSync == nil {
			continue
		}
		d := res.DiskSync
		rows = append(rows, []string{s.Name, fmt.Sprint(d.Syncs), fmtDur(d.P50), fmtDur(d.P99), fmtDur(d.Max)})
	}
	if len(rows) == 0 {
		return
	}
	every := r.Config.ProbeEvery
	fmt.Fprintf(b, "\n| disk probe during S2 (4 KB write and fdatasync every %v) | syncs | p50 | p99 | max |\n|---|---:|---:|---:|---:|\n", every)
	for _, cells := range rows {
		row(b, cells)
	}
}

// writeStore writes what the systems that report it wrote to their store per message.
func (r *Report) writeStore(b *strings.Builder) {
	var rows [][]string
	for _, s := range r.Systems {
		for _, sc := range r.Scenarios {
			res, ok := s.Results[sc]
			if !ok || res.Store == nil {
				continue
			}
			u := res.Store
			rows = append(rows, []string{s.Name, strings.ToUpper(sc), fmt.Sprintf("%.3f", u.SyncsPerMessage),
				fmt.Sprintf("%.0f", u.WALBytesPerMessage), fmt.Sprintf("%.0f", u.TableBytesPerMessage)})
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("\n| system | scenario | fsyncs per message | WAL bytes per message | table bytes per message (flushes and compactions) |\n|---|---|---:|---:|---:|\n")
	for _, cells := range rows {
		row(b, cells)
	}
}
