package luahost

// hashIndexMin is the field count from which a hash keeps a map index; below
// it a linear scan over a few fields is faster and smaller.
const hashIndexMin = 16

// hash is a Redis hash that keeps fields in insertion order, as Redis's
// listpack encoding does for the small hashes scripts use (HGETALL order).
type hash struct {
	fields []string
	values []string
	index  map[string]int // field -> position; nil below hashIndexMin fields
}

func (h *hash) len() int { return len(h.fields) }

func (h *hash) find(field string) int {
	if h.index != nil {
		if i, ok := h.index[field]; ok {
			return i
		}
		return -1
	}
	for i, f := range h.fields {
		if f == field {
			return i
		}
	}
	return -1
}

func (h *hash) get(field string) (string, bool) {
	if i := h.find(field); i >= 0 {
		return h.values[i], true
	}
	return "", false
}

// set stores value under field and reports whether the field is new.
func (h *hash) set(field, value string) bool {
	if i := h.find(field); i >= 0 {
		h.values[i] = value
		return false
	}
	h.fields = append(h.fields, field)
	h.values = append(h.values, value)
	if h.index != nil {
		h.index[field] = len(h.fields) - 1
	} else if len(h.fields) >= hashIndexMin {
		h.reindex()
	}
	return true
}

// del removes field and reports whether it was there.
func (h *hash) del(field string) bool {
	i := h.find(field)
	if i < 0 {
		return false
	}
	h.fields = append(h.fields[:i], h.fields[i+1:]...)
	h.values = append(h.values[:i], h.values[i+1:]...)
	if h.index != nil {
		if len(h.fields) < hashIndexMin/2 {
			h.index = nil
		} else {
			h.reindex()
		}
	}
	return true
}

func (h *hash) reindex() {
	h.index = make(map[string]int, len(h.fields))
	for i, f := range h.fields {
		h.index[f] = i
	}
}
