// Package keyslot computes Redis Cluster hash slots, as the engine routes calls and as
// luahost holds a script to the keys a cluster node serves.
package keyslot

// Of is the Redis Cluster hash slot of key: CRC-16/XMODEM of its hash tag (the
// bytes between the first '{' and the first '}' after it, when there are any) or of the
// whole key, modulo 16384, as Redis's keyHashSlot computes it.
func Of(key string) uint16 {
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
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^key[i]]
	}
	return crc & 16383
}

// crc16Table is CRC-16/XMODEM's (polynomial 0x1021) table of byte remainders, the table
// of Redis's crc16.c.
var crc16Table = func() (t [256]uint16) {
	for b := range t {
		crc := uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[b] = crc
	}
	return t
}()
