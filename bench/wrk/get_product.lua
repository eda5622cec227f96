-- bench/wrk/get_product.lua: GET /v1/products/{id} with an id drawn at random
-- from a file of existing product ids, for wrk 4.x (used by
-- bench/run_gateway_bench.sh).
--
--   WRK_IDS_FILE=ids.txt wrk -t2 -c64 -d15s -s bench/wrk/get_product.lua http://127.0.0.1:8080
--
-- WRK_IDS_FILE      one product id per line (required)
-- WRK_COUNT_STATUS  when set (non-empty), every response is handed to Lua and
--                   counted by status code, and the counts are printed; this
--                   costs the client some CPU, so the throughput phase
--                   leaves it off and relies on wrk's own non-2xx count.
--
-- done() prints one machine-readable line:
--   RESULT requests=N seconds=S rps=R mean_ms=.. p50_ms=.. p90_ms=.. p99_ms=..
--          p999_ms=.. max_ms=.. non2xx=N connect_err=N read_err=N write_err=N timeouts=N
-- (and, with WRK_COUNT_STATUS, "STATUS <code> <count>" lines).

local ids = {}
local threads = {}
local n_threads = 0

local function load_ids()
  local path = os.getenv("WRK_IDS_FILE")
  if path == nil or path == "" then
    error("get_product.lua: set WRK_IDS_FILE to a file of product ids")
  end
  local f = assert(io.open(path, "r"))
  local list = {}
  for line in f:lines() do
    if line ~= "" then
      list[#list + 1] = line
    end
  end
  f:close()
  if #list == 0 then
    error("get_product.lua: no ids in " .. path)
  end
  return list
end

function setup(thread)
  n_threads = n_threads + 1
  thread:set("tid", n_threads)
  threads[#threads + 1] = thread
end

function init(args)
  ids = load_ids()
  -- tid is set by setup() before init() runs in the thread.
  math.randomseed(os.time() * 1000 + (tid or 0) * 7919)
  statuses = {}
end

function request()
  return wrk.format("GET", "/v1/products/" .. ids[math.random(#ids)])
end

local count_status = os.getenv("WRK_COUNT_STATUS")
if count_status ~= nil and count_status ~= "" then
  function response(status, headers, body)
    statuses[status] = (statuses[status] or 0) + 1
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  local secs = summary.duration / 1e6
  local function ms(us) return us / 1000.0 end
  io.write(string.format(
    "RESULT requests=%d seconds=%.2f rps=%.0f mean_ms=%.3f p50_ms=%.3f p90_ms=%.3f " ..
    "p99_ms=%.3f p999_ms=%.3f max_ms=%.3f non2xx=%d connect_err=%d read_err=%d " ..
    "write_err=%d timeouts=%d\n",
    summary.requests, secs, summary.requests / secs, ms(latency.mean),
    ms(latency:percentile(50)), ms(latency:percentile(90)), ms(latency:percentile(99)),
    ms(latency:percentile(99.9)), ms(latency.max), e.status, e.connect, e.read, e.write,
    e.timeout))
  if count_status ~= nil and count_status ~= "" then
    local total = {}
    for _, t in ipairs(threads) do
      local s = t:get("statuses")
      if s ~= nil then
        for code, n in pairs(s) do
          total[code] = (total[code] or 0) + n
        end
      end
    end
    local codes = {}
    for code in pairs(total) do codes[#codes + 1] = code end
    table.sort(codes)
    for _, code in ipairs(codes) do
      io.write(string.format("STATUS %d %d\n", code, total[code]))
    end
  end
end
