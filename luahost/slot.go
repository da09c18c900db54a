package luahost

// keySlot is the Redis Cluster hash slot of key: CRC-16/XMODEM of its hash tag (the
// bytes between the first '{' and the first '}' after it, when there are any) or of the
// whole key, modulo 16384, as Redis's keyHashSlot computes it.
func keySlot(key string) int {
	for i := 0; i < len(key); i++ {
		if key[i] != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j > i+1 {
					key = key[i+1 : j]
				}
				break
			}
		}
		break
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc & 16383)
}

// inDeclaredSlot reports whether key hashes to the slot of one of declared: a key a
// Redis Cluster node serving those keys runs a script's command on.
func inDeclaredSlot(key string, declared []string) bool {
	s := keySlot(key)
	for _, d := range declared {
		if keySlot(d) == s {
			return true
		}
	}
	return false
}
