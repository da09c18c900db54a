-- list_log: a sliding log kept in a list: at most `limit` cost in any window-long
-- interval, exactly.
--
-- KEYS:   the rule's key, a list of instants (µs), one entry per unit of cost charged,
--         oldest first (the server's clock never runs back, so RPUSH keeps it sorted).
--         commit pops with LPOP key count (Redis >= 6.2).
-- params: limit (count >= 1, at most 1000: one entry per unit), window (µs >= 1).
-- check:  live = the entries after now - window (the tail of the list from the first
--         such entry); a request of cost c is allowed iff live + c <= limit.
--         remaining = limit - live, less c when allowed.
--         retry_after (denied) = until the (live + c - limit)-th oldest live entry leaves
--         the window (its instant + window - now), the first microsecond at which c fits;
--         -1 when c > limit.
--         reset_after = until the newest entry leaves the window, 0 when none is live.
-- precision: exact, to the microsecond.
-- TTL:    reset_after (expire_us); commit pops the entries that left the window, so the
--         list holds at most `limit` entries.

params = {'pos', 'pos'}

function validate(p)
  if p[1] > 1000 then
    return 'list_log keeps one entry per unit of cost: limit must be at most 1000'
  end
end

function check(key, now, cost, p)
  local limit, window = p[1], p[2]
  local log = call('LRANGE', key, 0, -1)
  local first = #log + 1
  for i = 1, #log do
    if tonumber(log[i]) > now - window then
      first = i
      break
    end
  end
  local live = #log - first + 1
  local reset = 0
  if live > 0 then
    reset = tonumber(log[#log]) + window - now
  end
  if cost > limit then
    return 0, nonneg(limit - live), -1, reset, limit
  end
  if live + cost <= limit then
    if cost > 0 then
      reset = window
    end
    return 1, limit - live - cost, 0, reset, limit, {now, first - 1, cost, window}
  end
  local due = tonumber(log[first + live + cost - limit - 1]) + window - now
  return 0, nonneg(limit - live), due, reset, limit
end

function commit(key, w)
  local now, gone, cost = w[1], w[2], w[3]
  if gone > 0 then
    call('LPOP', key, gone)
  end
  local entries = {}
  for i = 1, cost do
    entries[i] = now
  end
  call('RPUSH', key, unpack(entries))
  expire_us(key, w[4])
end
