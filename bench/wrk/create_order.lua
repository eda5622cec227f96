-- bench/wrk/create_order.lua: POST /v1/orders with one fixed body, every
-- response looked at, for wrk 4.x (bench/run_breaker_bench.sh: the catalog
-- is down, so each answer is a 503 refusal).
--
--   WRK_ORDER_BODY='{"customer_id":"c1","items":[...]}' WRK_TOKEN=$TOKEN \
--     wrk -t2 -c16 -d15s -s bench/wrk/create_order.lua http://127.0.0.1:8080
--
-- WRK_ORDER_BODY  the CreateOrder JSON (required)
-- WRK_TOKEN       the bearer token sent with every request (result.authorize): the route
--                 needs orders:write, and customer_id must be the token's subject or empty
--
-- done() prints the RESULT line of result.lua, then
--   STATUS <code> <count>            responses by HTTP status
--   CHECK retry_after <count>        responses with a Retry-After header
--   CHECK status_body <count>        bodies that are a google.rpc.Status
--                                    ({"code":N,"message":"...","details":[...]})

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local result = dofile(dir .. "result.lua")

function setup(thread)
  result.collect(thread)
end

function init(args)
  local body = os.getenv("WRK_ORDER_BODY")
  if body == nil or body == "" then
    error("create_order.lua: set WRK_ORDER_BODY to a CreateOrder body")
  end
  wrk.method = "POST"
  wrk.path = "/v1/orders"
  wrk.body = body
  wrk.headers["Content-Type"] = "application/json"
  result.authorize()
  statuses = {}
  checks = {retry_after = 0, status_body = 0}
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
  if headers["Retry-After"] ~= nil or headers["retry-after"] ~= nil then
    checks.retry_after = checks.retry_after + 1
  end
  if body:find('^{"code":%d+,"message":".*","details":%[.*%]}$') then
    checks.status_body = checks.status_body + 1
  end
end

function done(summary, latency, requests)
  io.write(result.line(summary, latency))
  result.print_counts("STATUS", result.sum("statuses"))
  result.print_counts("CHECK", result.sum("checks"))
end
