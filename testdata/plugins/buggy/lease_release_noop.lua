-- base: lease_pool
-- bug: release removes the bare lease id while the slots are stored as "<lease>#<i>", so a release frees nothing and every slot stays taken until its ttl.
-- caught-by: denials

params = {'pos', 'pos', 'str'}

local function slot(lease, i)
  return string.format('%s#%d', lease, i)
end

function check(key, now, cost, p)
  local slots, ttl = p[1], p[2]
  local after = '(' .. string.format('%.0f', now)
  local held = call('ZCOUNT', key, after, '+inf')
  local reset = 0
  if held > 0 then
    local last = call('ZRANGE', key, -1, -1, 'WITHSCORES')
    reset = tonumber(last[2]) - now
  end
  if cost > slots then
    return 0, nonneg(slots - held), -1, reset, slots
  end
  if held + cost <= slots then
    if cost > 0 then
      reset = ttl
    end
    return 1, slots - held - cost, 0, reset, slots, {now, ttl, p[3], cost, slots}
  end
  local nth = call('ZRANGEBYSCORE', key, after, '+inf', 'WITHSCORES', 'LIMIT', held + cost - slots - 1, 1)
  return 0, nonneg(slots - held), tonumber(nth[2]) - now, reset, slots
end

function commit(key, w)
  local now, ttl, lease, cost, slots = w[1], w[2], w[3], w[4], w[5]
  call('ZREMRANGEBYSCORE', key, '-inf', now)
  for i = 1, cost do
    call('ZADD', key, now + ttl, slot(lease, i))
  end
  call('ZREMRANGEBYRANK', key, 0, -(slots + 1))
  expire_us(key, ttl)
end

function refund(key, now, cost, p)
  for i = 1, cost do
    call('ZREM', key, p[3])
  end
end
