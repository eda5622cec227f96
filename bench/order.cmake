# bench_http: closed-loop HTTP load generator for the gateway's POST /v1/orders
# (libcurl multi: N requests in flight on N keep-alive connections). Run
# through bench/run_order_bench.sh, which starts catalog, order and gateway and
# compares the figure with pgbench -N on the same Postgres; see
# docs/benchmarks.md.
find_package(CURL REQUIRED)
add_executable(bench_http ${CMAKE_CURRENT_LIST_DIR}/bench_http.c)
target_link_libraries(bench_http PRIVATE CURL::libcurl svc_warnings)
