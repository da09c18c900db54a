-- base: list_log
-- bug: an entry exactly window old still counts (>= instead of >), so the window is one microsecond longer than the retry-after it reports: the retry is denied.
-- caught-by: retry-after

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
    if tonumber(log[i]) >= now - window then
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
