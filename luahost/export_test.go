package luahost

// CommandSpec returns the arity and key positions the host's command table
// gives name, as Redis's COMMAND INFO spells them.
func CommandSpec(name string) (arity, first, last, step int, ok bool) {
	c := findCommand(name)
	if c == nil {
		return 0, 0, 0, 0, false
	}
	return c.arity, c.first, c.last, c.step, true
}

// RedisCommands returns the Redis 7.0 command names the host knows of.
func RedisCommands() map[string]bool { return redisCommands }
