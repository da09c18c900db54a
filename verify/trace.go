package verify

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Trace is recorded traffic to replay through a policy instead of a scenario's generated
// traffic.
type Trace struct {
	// Start is the instant of offset 0 when the trace's timestamps are absolute (RFC 3339),
	// so windows align as they did when it was recorded; zero when they are offsets.
	Start    time.Time
	Arrivals []Arrival // in time order
}

// Arrival is one recorded request.
type Arrival struct {
	At     time.Duration     // since Trace.Start (or the simulation's start)
	Source string            // the traffic it counts as; DefaultSource when not given
	Attrs  map[string]string // the request's attributes
	N      int64             // the request's cost multiplier (Engine.AllowN); 1 when not given
	Hold   time.Duration     // how long the request lasts once allowed (leases)
	Line   int               // the line of the file it came from
}

// DefaultSource is the traffic name of a trace record that names none.
const DefaultSource = "trace"

// ReadTrace reads a trace in JSON Lines or CSV; name (a file name) picks the format by its
// extension (.csv; .jsonl, .ndjson, .json), and otherwise the first byte does ('{' is JSON).
//
// JSON Lines: one object per line, such as
//
//	{"t": "2026-03-01T12:00:00.250Z", "attrs": {"ip": "203.0.113.7", "path": "/login"}}
//	{"t": "1.5s", "source": "attacker", "attrs": {"ip": "203.0.113.7"}, "n": 2, "hold": "10s"}
//
// t is an RFC 3339 timestamp, or an offset from the start of the replay as a Go duration
// ("1.5s", "250ms") or a number of seconds; one trace uses one kind. attrs holds the
// request attributes (strings; numbers and booleans are taken as written); without attrs,
// every field other than t, source, n and hold is an attribute. source names the traffic
// the request counts as in the report and in expectations (default "trace"), n is its
// cost multiplier (default 1) and hold how long it lasts once allowed.
//
// CSV: a header row, then one request per row. The time column is named t, time,
// timestamp or ts; columns named source, n and hold mean what they do in JSON; every
// other column is an attribute.
//
// Records need not be sorted: they are ordered by time, keeping file order for equal
// times.
func ReadTrace(r io.Reader, name string) (*Trace, error) {
	br := bufio.NewReader(r)
	isJSON := false
	switch strings.ToLower(filepath.Ext(name)) {
	case ".jsonl", ".ndjson", ".json":
		isJSON = true
	case ".csv":
	default:
		for {
			b, err := br.ReadByte()
			if err != nil {
				break
			}
			if b == ' ' || b == '\t' || b == '\r' || b == '\n' {
				continue
			}
			isJSON = b == '{'
			_ = br.UnreadByte()
			break
		}
	}
	p := &traceParser{name: name}
	var err error
	if isJSON {
		err = p.readJSON(br)
	} else {
		err = p.readCSV(br)
	}
	if err != nil {
		return nil, err
	}
	if len(p.recs) == 0 {
		return nil, fmt.Errorf("%s: the trace has no requests", name)
	}
	return p.finish(), nil
}

type traceRec struct {
	Arrival
	abs time.Time // absolute timestamps
}

type traceParser struct {
	name     string
	recs     []traceRec
	absolute int // 0 unknown, 1 absolute, -1 offsets
}

func (p *traceParser) errorf(line int, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s", p.name, line, fmt.Sprintf(format, args...))
}

// setTime parses a time field into rec.
func (p *traceParser) setTime(rec *traceRec, s string) error {
	s = strings.TrimSpace(s)
	if s == "" {
		return p.errorf(rec.Line, "no time")
	}
	kind := -1
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		rec.abs, kind = t, 1
	} else if d, err := time.ParseDuration(s); err == nil {
		rec.At = d
	} else if f, err := strconv.ParseFloat(s, 64); err == nil && !badFloat(f) {
		rec.At = time.Duration(f * float64(time.Second))
	} else {
		return p.errorf(rec.Line, "time %q is neither an RFC 3339 timestamp (2026-03-01T12:00:00.25Z) nor an offset (1.5s, 250ms, 1.5)", s)
	}
	if kind < 0 && rec.At < 0 {
		return p.errorf(rec.Line, "time %q is a negative offset", s)
	}
	if p.absolute != 0 && p.absolute != kind {
		return p.errorf(rec.Line, "time %q mixes absolute timestamps and offsets; use one kind in a trace", s)
	}
	p.absolute = kind
	return nil
}

func badFloat(f float64) bool { return f != f || f > 1e12 || f < -1e12 }

func (p *traceParser) setN(rec *traceRec, s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return p.errorf(rec.Line, "n %q is not a whole number, 0 or more", s)
	}
	rec.N = n
	return nil
}

func (p *traceParser) setHold(rec *traceRec, s string) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d < 0 {
		return p.errorf(rec.Line, "hold %q is not a duration such as 10s", s)
	}
	rec.Hold = d
	return nil
}

func (p *traceParser) readJSON(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(b, &obj); err != nil {
			return p.errorf(line, "not a JSON object: %v", err)
		}
		rec := traceRec{Arrival: Arrival{Line: line, N: 1, Source: DefaultSource, Attrs: map[string]string{}}}
		raw, ok := obj["t"]
		if !ok {
			return p.errorf(line, `no "t" (the request's time)`)
		}
		ts, err := jsonScalar(raw)
		if err != nil {
			return p.errorf(line, "t: %v", err)
		}
		if err := p.setTime(&rec, ts); err != nil {
			return err
		}
		for _, k := range []string{"source", "n", "hold"} {
			raw, ok := obj[k]
			if !ok {
				continue
			}
			s, err := jsonScalar(raw)
			if err != nil {
				return p.errorf(line, "%s: %v", k, err)
			}
			switch k {
			case "source":
				if s != "" {
					rec.Source = s
				}
			case "n":
				err = p.setN(&rec, s)
			case "hold":
				err = p.setHold(&rec, s)
			}
			if err != nil {
				return err
			}
		}
		var attrs map[string]json.RawMessage
		if raw, ok := obj["attrs"]; ok {
			if err := json.Unmarshal(raw, &attrs); err != nil {
				return p.errorf(line, "attrs is not an object: %v", err)
			}
		} else {
			attrs = without(obj, "t", "source", "n", "hold")
		}
		for k, raw := range attrs {
			s, err := jsonScalar(raw)
			if err != nil {
				return p.errorf(line, "attribute %q: %v", k, err)
			}
			rec.Attrs[k] = s
		}
		p.recs = append(p.recs, rec)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	return nil
}

func without(m map[string]json.RawMessage, drop ...string) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		if !slices.Contains(drop, k) {
			out[k] = v
		}
	}
	return out
}

// jsonScalar returns a JSON string's value, or a number's or boolean's text.
func jsonScalar(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	switch v.(type) {
	case float64, bool:
		return string(raw), nil
	case nil:
		return "", nil
	}
	return "", errors.New("want a string, number or boolean")
}

func (p *traceParser) readCSV(r io.Reader) error {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	tcol := -1
	for i, h := range header {
		h = strings.TrimSpace(h)
		header[i] = h
		switch strings.ToLower(h) {
		case "t", "time", "timestamp", "ts":
			if tcol < 0 {
				tcol = i
			}
		}
	}
	if tcol < 0 {
		return p.errorf(1, "no time column: name one t, time, timestamp or ts (the header is %s)", strings.Join(header, ","))
	}
	line := 1
	for {
		row, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		line++
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		if len(row) == 1 && strings.TrimSpace(row[0]) == "" {
			continue
		}
		if len(row) != len(header) {
			return p.errorf(line, "%d fields, the header has %d", len(row), len(header))
		}
		rec := traceRec{Arrival: Arrival{Line: line, N: 1, Source: DefaultSource, Attrs: map[string]string{}}}
		for i, v := range row {
			var err error
			switch h := strings.ToLower(header[i]); {
			case i == tcol:
				err = p.setTime(&rec, v)
			case h == "source":
				if v != "" {
					rec.Source = v
				}
			case h == "n":
				err = p.setN(&rec, v)
			case h == "hold":
				if v != "" {
					err = p.setHold(&rec, v)
				}
			default:
				rec.Attrs[header[i]] = v
			}
			if err != nil {
				return err
			}
		}
		p.recs = append(p.recs, rec)
	}
}

// finish orders the records by time and makes absolute times offsets from the first.
func (p *traceParser) finish() *Trace {
	tr := &Trace{}
	if p.absolute == 1 {
		start := p.recs[0].abs
		for _, r := range p.recs {
			if r.abs.Before(start) {
				start = r.abs
			}
		}
		tr.Start = start
		for i := range p.recs {
			p.recs[i].At = p.recs[i].abs.Sub(start)
		}
	}
	slices.SortStableFunc(p.recs, func(a, b traceRec) int {
		switch {
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	})
	tr.Arrivals = make([]Arrival, len(p.recs))
	for i, r := range p.recs {
		tr.Arrivals[i] = r.Arrival
	}
	return tr
}
