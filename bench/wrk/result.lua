-- bench/wrk/result.lua: what the bench/wrk scripts share, loaded with
--   local result = dofile(<this directory> .. "result.lua")
--
-- result.collect(thread)        in setup(): numbers the thread, keeps it for done()
-- result.line(summary, latency) the machine-readable line the bench scripts read:
--   RESULT requests=N seconds=S rps=R mean_ms=.. p50_ms=.. p90_ms=.. p99_ms=..
--          p999_ms=.. max_ms=.. non2xx=N connect_err=N read_err=N write_err=N timeouts=N
-- result.sum(name)              in done(): the per-thread tables `name` (a global
--                               of each thread's script, key -> count) added up
-- result.print_counts(tag, t)   "TAG <key> <count>" lines, keys sorted
-- result.authorize()            in init(): when WRK_TOKEN is set (non-empty), every request
--                               sends "Authorization: Bearer $WRK_TOKEN" (bench/lib.sh's
--                               bench_auth makes the token); unset, none

local M = {}
local threads = {}

function M.collect(thread)
  threads[#threads + 1] = thread
  thread:set("tid", #threads)
end

function M.line(summary, latency)
  local e = summary.errors
  local secs = summary.duration / 1e6
  local function ms(us) return us / 1000.0 end
  return string.format(
    "RESULT requests=%d seconds=%.2f rps=%.0f mean_ms=%.3f p50_ms=%.3f p90_ms=%.3f " ..
    "p99_ms=%.3f p999_ms=%.3f max_ms=%.3f non2xx=%d connect_err=%d read_err=%d " ..
    "write_err=%d timeouts=%d\n",
    summary.requests, secs, summary.requests / secs, ms(latency.mean),
    ms(latency:percentile(50)), ms(latency:percentile(90)), ms(latency:percentile(99)),
    ms(latency:percentile(99.9)), ms(latency.max), e.status, e.connect, e.read, e.write,
    e.timeout)
end

function M.sum(name)
  local total = {}
  for _, t in ipairs(threads) do
    local s = t:get(name)
    if s ~= nil then
      for k, n in pairs(s) do total[k] = (total[k] or 0) + n end
    end
  end
  return total
end

function M.print_counts(tag, t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do io.write(string.format("%s %s %d\n", tag, tostring(k), t[k])) end
end

function M.authorize()
  local token = os.getenv("WRK_TOKEN")
  if token ~= nil and token ~= "" then
    wrk.headers["Authorization"] = "Bearer " .. token
  end
end

return M
