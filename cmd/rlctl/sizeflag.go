package main

import (
	"strconv"

	"github.com/rlctl/rlctl/dsl"
)

// sizeFlag is a flag that takes a size as policies write it ("64MiB", "1.5GB", "2048"),
// or 0 for none.
type sizeFlag int64

func (f *sizeFlag) String() string { return strconv.FormatInt(int64(*f), 10) }

func (f *sizeFlag) Set(s string) error {
	if s == "0" {
		*f = 0
		return nil
	}
	n, err := dsl.ParseBytes(s)
	if err != nil {
		return err
	}
	*f = sizeFlag(n)
	return nil
}
