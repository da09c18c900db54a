package verify

import (
	"fmt"
	"strconv"
	"strings"
)

// keyState is a key's state as luahost.Host.Dump writes it ("KIND|LEN:ITEM,...|ttl:at
// Nms" or "|ttl:none"), read back: for a string its value, for a hash its fields and
// values, for a sorted set its members and scores, for a list its elements; expireAt in
// milliseconds since the Unix epoch (-1: no TTL).
type keyState struct {
	kind     string
	items    []string
	expireAt int64
}

// parseState reads a Dump; ok is false for text of another form.
func parseState(s string) (st keyState, ok bool) {
	kind, rest, found := strings.Cut(s, "|")
	if !found {
		return keyState{}, false
	}
	st.kind = kind
	for !strings.HasPrefix(rest, "|") {
		n, tail, found := strings.Cut(rest, ":")
		size, err := strconv.Atoi(n)
		if !found || err != nil || size < 0 || len(tail) < size+1 || tail[size] != ',' {
			return keyState{}, false
		}
		st.items = append(st.items, tail[:size])
		rest = tail[size+1:]
	}
	switch ttl := strings.TrimPrefix(rest, "|ttl:"); {
	case ttl == "none":
		st.expireAt = -1
	case strings.HasPrefix(ttl, "at ") && strings.HasSuffix(ttl, "ms"):
		ms, err := strconv.ParseInt(ttl[3:len(ttl)-2], 10, 64)
		if err != nil {
			return keyState{}, false
		}
		st.expireAt = ms
	default:
		return keyState{}, false
	}
	return st, true
}

// pairs reports whether the kind's items come in pairs (field and value, member and
// score).
func (st keyState) pairs() bool { return st.kind == "hash" || st.kind == "zset" }

// entries returns the state's items by name: a hash's fields, a sorted set's members
// (values: values and scores), a string's or list's positions ("", "0", "1", ...).
func (st keyState) entries() (names []string, values map[string]string) {
	values = map[string]string{}
	switch {
	case st.pairs():
		for i := 0; i+1 < len(st.items); i += 2 {
			names = append(names, st.items[i])
			values[st.items[i]] = st.items[i+1]
		}
	case st.kind == "string":
		names, values[""] = []string{""}, strings.Join(st.items, "")
	default:
		for i, v := range st.items {
			k := strconv.Itoa(i)
			names = append(names, k)
			values[k] = v
		}
	}
	return names, values
}

// expiry is when the key expires, as a trace time (+offset since the trace's start), or
// "no TTL".
func (st keyState) expiry() string {
	if st.expireAt < 0 {
		return "no TTL"
	}
	return "expires at " + traceTime(st.expireAt*1000-base)
}

// traceTime is t µs since the trace's start as counterexamples print it (+1m0.5s).
func traceTime(t int64) string {
	if t < 0 {
		return "-" + fmtUS(-t)
	}
	return "+" + fmtUS(t)
}

// maxStateItems is how many of a key's items a finding prints; the rest are counted.
const maxStateItems = 8

// The state of a rule with further keys (rig.dump) is its key's Dump, then for each
// further key keySep, its name, keyNameSep and its Dump. Neither byte occurs in a Dump's
// framing, and names are identifiers.
const (
	keySep     = "\x1e"
	keyNameSep = "\x1f"
)

// splitKeys splits a rule's state into its keys' names ("" for the rule's own key) and
// Dumps; a single key's state is one part.
func splitKeys(s string) (names, dumps []string) {
	for i, part := range strings.Split(s, keySep) {
		if i == 0 {
			names, dumps = append(names, ""), append(dumps, part)
			continue
		}
		n, d, _ := strings.Cut(part, keyNameSep)
		names, dumps = append(names, n), append(dumps, d)
	}
	return names, dumps
}

// stateText is a Dump for people: "hash {n=3, w=12}, expires at +1m0.5s", "(no key)"; for
// a rule with further keys each key's, named: "key (no key); prev hash {…}".
func stateText(s string) string {
	if strings.Contains(s, keySep) {
		names, dumps := splitKeys(s)
		var parts []string
		for i, d := range dumps {
			parts = append(parts, keyLabel(names[i])+" "+stateText(d))
		}
		return strings.Join(parts, "; ")
	}
	if s == "" {
		return "(no key)"
	}
	st, ok := parseState(s)
	if !ok {
		return s
	}
	names, values := st.entries()
	var parts []string
	for i, n := range names {
		if i == maxStateItems {
			parts = append(parts, fmt.Sprintf("… %d more", len(names)-i))
			break
		}
		parts = append(parts, itemText(st, n, values[n]))
	}
	body := strings.Join(parts, ", ")
	switch st.kind {
	case "string":
		body = strconv.Quote(values[""])
	case "list":
		body = "[" + body + "]"
	default:
		body = "{" + body + "}"
	}
	return st.kind + " " + body + ", " + st.expiry()
}

// itemText is one item of st: field=value, member:score, or an element.
func itemText(st keyState, name, value string) string {
	switch st.kind {
	case "hash":
		return name + "=" + value
	case "zset":
		return name + ":" + value
	}
	return value
}

// stateDiff says what changed from one Dump to another: the fields (members, elements)
// added, removed or changed, and the expiry, at most maxStateItems of them; whole states
// where the kind changed or the key came or went.
func stateDiff(before, after string) string {
	if strings.Contains(before, keySep) || strings.Contains(after, keySep) {
		names, bd := splitKeys(before)
		_, ad := splitKeys(after)
		var parts []string
		for i := range min(len(bd), len(ad)) {
			if bd[i] != ad[i] {
				parts = append(parts, keyLabel(names[i])+" "+stateDiff(bd[i], ad[i]))
			}
		}
		return strings.Join(parts, "; ")
	}
	b, okB := parseState(before)
	a, okA := parseState(after)
	if before == "" || after == "" || !okB || !okA || a.kind != b.kind || a.kind == "list" {
		return stateText(before) + " became " + stateText(after)
	}
	bn, bv := b.entries()
	an, av := a.entries()
	var changes []string
	for _, n := range bn {
		v, kept := av[n]
		switch {
		case !kept:
			changes = append(changes, "removed "+itemText(b, n, bv[n]))
		case v != bv[n] && a.kind == "string":
			changes = append(changes, strconv.Quote(bv[n])+" became "+strconv.Quote(v))
		case v != bv[n]:
			changes = append(changes, itemText(b, n, bv[n])+" became "+itemText(a, n, v))
		}
	}
	for _, n := range an {
		if _, was := bv[n]; !was {
			changes = append(changes, "added "+itemText(a, n, av[n]))
		}
	}
	if a.expireAt != b.expireAt {
		changes = append(changes, "expiry "+strings.TrimPrefix(b.expiry(), "expires ")+" became "+strings.TrimPrefix(a.expiry(), "expires "))
	}
	if len(changes) > maxStateItems {
		changes = append(changes[:maxStateItems], fmt.Sprintf("… %d more changes", len(changes)-maxStateItems))
	}
	return a.kind + ": " + strings.Join(changes, "; ")
}

// keyLabel names one of a rule's keys in a finding: "key" for its own, else the further
// key's name.
func keyLabel(name string) string {
	if name == "" {
		return "key"
	}
	return name
}
