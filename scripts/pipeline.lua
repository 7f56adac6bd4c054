-- wrk script: HTTP/1.1 pipelining, DEPTH requests written back to back per connection turn
-- (default 16). Used by scripts/bench-http.sh when PIPELINE is set.
local depth = tonumber(os.getenv("PIPELINE") or "16")
init = function(args)
  local reqs = {}
  for i = 1, depth do
    reqs[i] = wrk.format(nil, wrk.path)
  end
  batch = table.concat(reqs)
end
request = function()
  return batch
end
