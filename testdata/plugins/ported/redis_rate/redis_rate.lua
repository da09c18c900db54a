-- redis_rate: go-redis/redis_rate's AllowN (lua.go, script allowN; itself Pavel Pravosud's
-- rwz/redis-gcra), GCRA with its whole state one floating-point number of seconds, ported
-- to the plugin contract. Upstream's arithmetic is kept as it is, floats and all; only how
-- the key, the time and the parameters arrive, and how the answers leave, is plumbing.
--
-- KEYS:   the rule's key, a string: TAT, the theoretical arrival time, as upstream stores
--         it: seconds since 2017-01-01T00:00:00Z as a double (a fraction of µs and all),
--         written with SET ... EX ceil(reset_after) (whole seconds). No key means TAT <= now.
-- params: rate (r per P µs: upstream's Limit.Rate and Limit.Period, P sent as
--         Period.Seconds(), a float), burst (Limit.Burst). Upstream validates nothing.
-- check:  as upstream, in float seconds:
--           now  = (TIME[1] - 1483228800) + TIME[2] / 1000000    (from the contract's µs)
--           emission_interval = period / rate;  burst_offset = emission_interval * burst
--           tat  = max(TAT or now, now);  new_tat = tat + emission_interval * cost
--           diff = now - (new_tat - burst_offset);  remaining = diff / emission_interval
--         allowed iff remaining >= 0 (a float comparison); then TAT' = new_tat.
--         remaining   (allowed) = the float remaining, truncated by Redis's Lua-to-integer
--                     reply conversion; (denied) 0, whatever smaller cost would still fit.
--         retry_after (denied) = -diff = new_tat - burst_offset - now, returned by upstream
--                     through tostring (Lua's %.14g) and parsed by Go into a Duration
--                     (truncated to ns); never -1, even when cost > burst and the request can
--                     never pass. (allowed) upstream's -1 ("none") is the contract's 0.
--         reset_after = tat - now (denied) or new_tat - now (allowed), through tostring and
--                     time.Duration likewise.
--         The Durations are turned into the contract's µs rounded up (a client cannot wait
--         a fraction of a µs), the only rounding added here.
-- precision: upstream's, floats of seconds: TAT is a double near 3e8 s (ulp ~ 6e-8 s), and
--         its answers go through %.14g.
-- TTL:    SET ... EX ceil(reset_after): whole seconds (upstream), set only when reset_after
--         > 0.
-- Plumbing: upstream reads TIME itself; here the dispatcher's `now` (µs, the same TIME)
--         is split back into TIME's two integers. Upstream's reply {allowed = cost, ...}
--         says 0 for a cost-0 call; the contract's allowed is 1 for a peek that fits.
--         Upstream writes on a cost-0 call too (the same TAT, its EX renewed); here the
--         engine calls commit only for a positive cost.

params = {'pos', 'pos', 'pos'} -- rate amount, rate period (µs), burst

local JAN_1_2017 = 1483228800

-- time_seconds is upstream's `now` from the two integers of TIME.
local function time_seconds(now)
  local sec = idiv(now, 1000000)
  local usec = now - sec * 1000000
  return (sec - JAN_1_2017) + (usec / 1000000)
end

-- go_us is what Go makes of a float of seconds that the script returns with tostring:
-- strconv.ParseFloat, then time.Duration(f * 1e9) (truncated to ns), here in whole µs,
-- rounded up.
local function go_us(f)
  local s = tonumber(string.format('%.14g', f))
  local ns = s * 1000000000
  if ns >= 0 then
    ns = math.floor(ns)
  else
    ns = math.ceil(ns)
  end
  return cdiv(ns, 1000)
end

function check(key, now, cost, p)
  local rate, period, burst = p[1], p[2] / 1000000, p[3]
  local emission_interval = period / rate
  local increment = emission_interval * cost
  local burst_offset = emission_interval * burst

  local t = time_seconds(now)
  local tat = call('GET', key)
  if not tat then
    tat = t
  else
    tat = tonumber(tat)
  end
  tat = math.max(tat, t)

  local new_tat = tat + increment
  local allow_at = new_tat - burst_offset
  local diff = t - allow_at
  local remaining = diff / emission_interval

  if remaining < 0 then
    local reset_after = tat - t
    local retry_after = diff * -1
    return 0, 0, go_us(retry_after), nonneg(go_us(reset_after)), burst
  end

  local reset_after = new_tat - t
  local pending = nil
  if reset_after > 0 then
    pending = {new_tat, math.ceil(reset_after)}
  end
  return 1, math.floor(remaining), 0, nonneg(go_us(reset_after)), burst, pending
end

function commit(key, w)
  call('SET', key, w[1], 'EX', w[2])
end
