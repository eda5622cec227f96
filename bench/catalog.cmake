# bench_catalog: closed-loop GetProduct load generator (pkg/rpc client).
# Run through bench/run_catalog_bench.sh, which starts the catalog and compares
# the figure with pgbench on the same Postgres; see docs/benchmarks.md.
add_executable(bench_catalog ${CMAKE_CURRENT_LIST_DIR}/bench_catalog.c)
target_link_libraries(bench_catalog PRIVATE svc_rpc shopmicro_proto Threads::Threads svc_warnings)
