package dsl

// ParseBytes parses a size as policies write it: a whole number of bytes ("2048") or a
// number with a unit ("512B", "64KiB", "1.5MiB", "100KB"; B, KB, MB, GB, TB are powers of
// 1000, KiB, MiB, GiB, TiB powers of 1024). The result is a whole number of at least 1
// byte; anything else is an error that says what is wrong, for command-line flags that
// take sizes as policies do.
func ParseBytes(s string) (int64, error) { return parseBytes(s) }
