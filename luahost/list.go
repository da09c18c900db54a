package luahost

// list is a Redis list: a double-ended queue of strings in one slice,
// elements at buf[head:head+n], with room kept at both ends so that pushes
// and pops at either end are amortised O(1), as the list-based logs of rate
// limiters (LPUSH + LTRIM, RPUSH + LPOP) need.
type list struct {
	buf   []string
	head  int
	n     int
	bytes int64 // the heap the element strings take (memory.go)
}

func (l *list) len() int { return l.n }

// at returns the element at 0-based index i from the head (0 <= i < len).
func (l *list) at(i int) string { return l.buf[l.head+i] }

func (l *list) set(i int, v string) {
	l.bytes += stringBytes(v) - stringBytes(l.buf[l.head+i])
	l.buf[l.head+i] = v
}

// grow makes room for one more element at the front (front) or back.
func (l *list) grow(front bool) {
	if front && l.head > 0 || !front && l.head+l.n < len(l.buf) {
		return
	}
	size := max(2*l.n, 8)
	buf := make([]string, size)
	head := (size - l.n) / 2
	if front && head == 0 {
		head = 1
	}
	copy(buf[head:], l.buf[l.head:l.head+l.n])
	l.buf, l.head = buf, head
}

func (l *list) pushFront(v string) {
	l.grow(true)
	l.head--
	l.buf[l.head] = v
	l.n++
	l.bytes += stringBytes(v)
}

func (l *list) pushBack(v string) {
	l.grow(false)
	l.buf[l.head+l.n] = v
	l.n++
	l.bytes += stringBytes(v)
}

func (l *list) popFront() string {
	v := l.buf[l.head]
	l.buf[l.head] = ""
	l.head++
	l.n--
	l.bytes -= stringBytes(v)
	return v
}

func (l *list) popBack() string {
	l.n--
	v := l.buf[l.head+l.n]
	l.buf[l.head+l.n] = ""
	l.bytes -= stringBytes(v)
	return v
}

// trim keeps the elements of indexes start..end inclusive (already
// clamped, start > end keeps none).
func (l *list) trim(start, end int) {
	if start > end {
		clear(l.buf[l.head : l.head+l.n])
		l.head, l.n, l.bytes = 0, 0, 0
		return
	}
	for _, v := range l.buf[l.head : l.head+start] {
		l.bytes -= stringBytes(v)
	}
	for _, v := range l.buf[l.head+end+1 : l.head+l.n] {
		l.bytes -= stringBytes(v)
	}
	clear(l.buf[l.head : l.head+start])
	clear(l.buf[l.head+end+1 : l.head+l.n])
	l.head += start
	l.n = end - start + 1
}

// remove deletes the element at index i.
func (l *list) remove(i int) {
	l.bytes -= stringBytes(l.at(i))
	if i < l.n/2 {
		copy(l.buf[l.head+1:], l.buf[l.head:l.head+i])
		l.buf[l.head] = ""
		l.head++
	} else {
		copy(l.buf[l.head+i:], l.buf[l.head+i+1:l.head+l.n])
		l.buf[l.head+l.n-1] = ""
	}
	l.n--
}

// insert puts v at index i (0 <= i <= len), shifting what follows.
func (l *list) insert(i int, v string) {
	l.grow(false)
	copy(l.buf[l.head+i+1:], l.buf[l.head+i:l.head+l.n])
	l.buf[l.head+i] = v
	l.n++
	l.bytes += stringBytes(v)
}

// asList returns e's list.
func (e *entry) asList() *list { return e.obj.(*list) }
