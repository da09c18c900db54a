-- multi_period: two fixed windows kept at once, as multi-period limiters keep them: at most
-- per_minute in each aligned minute and per_month in each aligned month of 30 days.
--
-- KEYS:   the rule's key, a hash {m = index of the minute mc counts, mc = cost charged in
--         that minute, M = index of the month Mc counts, Mc = cost charged in that month}.
-- params: per_minute (count >= 1), per_month (count >= per_minute).
-- check:  at now, minute k = floor(now / MINUTE) and month K = floor(now / MONTH); the
--         counts are mc when m = k (else 0) and Mc when M = K (else 0). A request of cost
--         c is allowed iff mc + c <= per_minute and Mc + c <= per_month.
--         remaining = min(per_minute - mc, per_month - Mc), after the charge when allowed.
--         retry_after (denied) = the later end of the periods the request does not fit in:
--         the minute's, (k+1)*MINUTE - now, and the month's, (K+1)*MONTH - now; -1 when
--         c > per_minute.
--         reset_after = the later end of the periods whose count is above 0, else 0.
-- precision: exact, to the microsecond.
-- bound:  2 for each period: a fixed window lets its limit through at the end of one
--         window and again at the start of the next.
-- TTL:    reset_after (expire_us): past it neither count counts.

params = {'pos', 'pos'}

local MINUTE = 60 * 1000000
local MONTH = 30 * 86400 * 1000000

function validate(p)
  if p[2] < p[1] then
    return 'multi_period per_month must be at least per_minute'
  end
  if p[2] > MAX_INT / 4 then
    return 'multi_period per_month exceeds 2^51'
  end
end

-- counts returns the minute and month indexes at now and the cost charged in each.
local function counts(key, now)
  local k, K = idiv(now, MINUTE), idiv(now, MONTH)
  local st = call('HMGET', key, 'm', 'mc', 'M', 'Mc')
  local mc, Mc = 0, 0
  if tonumber(st[1]) == k then
    mc = tonumber(st[2])
  end
  if tonumber(st[3]) == K then
    Mc = tonumber(st[4])
  end
  return k, K, mc, Mc
end

function check(key, now, cost, p)
  local per_minute, per_month = p[1], p[2]
  local k, K, mc, Mc = counts(key, now)
  local minute_end, month_end = (k + 1) * MINUTE - now, (K + 1) * MONTH - now
  local minute_fits, month_fits = mc + cost <= per_minute, Mc + cost <= per_month
  local fits = minute_fits and month_fits
  if fits then
    mc, Mc = mc + cost, Mc + cost
  end
  local reset = 0
  if mc > 0 then
    reset = minute_end
  end
  if Mc > 0 and month_end > reset then
    reset = month_end
  end
  local remaining = per_minute - mc
  if per_month - Mc < remaining then
    remaining = per_month - Mc
  end
  if fits then
    return 1, remaining, 0, reset, per_minute, {k, mc, K, Mc, reset}
  end
  if cost > per_minute then
    return 0, nonneg(remaining), -1, reset, per_minute
  end
  local retry = 0
  if not minute_fits then
    retry = minute_end
  end
  if not month_fits and month_end > retry then
    retry = month_end
  end
  return 0, remaining, retry, reset, per_minute
end

function commit(key, w)
  call('HSET', key, 'm', w[1], 'mc', w[2], 'M', w[3], 'Mc', w[4])
  expire_us(key, w[5])
end
