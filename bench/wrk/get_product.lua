-- bench/wrk/get_product.lua: GET /v1/products/{id} with an id drawn at random
-- from a file of existing product ids, for wrk 4.x (used by
-- bench/run_gateway_bench.sh).
--
--   WRK_IDS_FILE=ids.txt WRK_TOKEN=$TOKEN wrk -t2 -c64 -d15s -s bench/wrk/get_product.lua http://127.0.0.1:8080
--
-- WRK_IDS_FILE      one product id per line (required)
-- WRK_TOKEN         a bearer token sent with every request (result.authorize);
--                   unset: the requests carry none (the route is public)
-- WRK_COUNT_STATUS  when set (non-empty), every response is handed to Lua and
--                   counted by status code, and the counts are printed; this
--                   costs the client some CPU, so the throughput phase
--                   leaves it off and relies on wrk's own non-2xx count.
--
-- done() prints the RESULT line of result.lua (and, with WRK_COUNT_STATUS,
-- "STATUS <code> <count>" lines).

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local result = dofile(dir .. "result.lua")
local ids = {}

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
  result.collect(thread)
end

function init(args)
  ids = load_ids()
  result.authorize()
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
  io.write(result.line(summary, latency))
  if count_status ~= nil and count_status ~= "" then
    result.print_counts("STATUS", result.sum("statuses"))
  end
end
