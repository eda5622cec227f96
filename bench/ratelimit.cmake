# ratelimit_bench: the rate limiter's cost per check (gateway/ratelimit.c),
# one hot key, 10,000 keys and 1,000,000 keys over the default table, on 1
# and 2 threads. See
# docs/benchmarks.md, "Rate limiter".
add_executable(ratelimit_bench ${CMAKE_CURRENT_LIST_DIR}/ratelimit_bench.c)
target_link_libraries(ratelimit_bench PRIVATE gateway_ratelimit svc_warnings Threads::Threads)
# The allocator is wrapped at link time so the run shows that a check
# allocates nothing (only static code is wrapped: ours).
target_link_options(ratelimit_bench PRIVATE -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc)
