params = {'pos'}

function check(key, now, cost, p)
  call('GET', key)
  for i = 1, 300000000 do
  end
  return 1, p[1], 0, 0, p[1]
end

function commit(key, w)
end
