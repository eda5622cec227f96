# bench_resilience: the added cost of the resilience chain per call, over a
# no-op transport, next to calling the no-op directly. The allocator is
# wrapped at link time so the run can prove that a call allocates nothing
# (only static code is wrapped: ours).
add_executable(bench_resilience ${CMAKE_CURRENT_LIST_DIR}/bench_resilience.c)
target_link_libraries(bench_resilience PRIVATE svc_resilience svc_warnings Threads::Threads)
target_link_options(bench_resilience PRIVATE
  -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc -Wl,--wrap=free
  -Wl,--wrap=aligned_alloc -Wl,--wrap=posix_memalign -Wl,--wrap=strdup)
