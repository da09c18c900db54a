package cli

import (
	"errors"
	"fmt"
	"io"
)

// Error is a mistake in what rlctl was asked to do, with a hint at what to do instead.
type Error struct {
	Msg  string // what is wrong: `no scenario named "x"`
	Hint string // what to do instead, "" for none
}

func (e *Error) Error() string { return e.Msg }

// WriteError writes err as rlctl reports a failure: "rlctl: error: " and the error, then,
// for an *Error with a Hint, "rlctl: hint: " and the hint.
func WriteError(w io.Writer, err error) {
	fmt.Fprintf(w, "rlctl: error: %v\n", err)
	if e, ok := errors.AsType[*Error](err); ok && e.Hint != "" {
		fmt.Fprintf(w, "rlctl: hint: %s\n", e.Hint)
	}
}
