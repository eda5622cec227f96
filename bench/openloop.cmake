# bench_openloop: open-loop HTTP/1.1 load at a fixed rate, latency from each
# request's due time (bench/run_breaker_bench.sh --rate).
add_executable(bench_openloop ${CMAKE_CURRENT_LIST_DIR}/bench_openloop.c)
target_link_libraries(bench_openloop PRIVATE svc_warnings)
