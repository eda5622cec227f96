# bench_relay: fills an outbox with OrderCreated rows encoded by the order
# service's own encoder (and the same keys and values for kcat -P), and
# measures CreateOrder -> record read by a consumer at a constant rate. Run
# through bench/run_relay_bench.sh, which starts Postgres, a broker, catalog,
# order and the relay, and compares the relay's drain rate with kcat -P on
# the same broker; see docs/benchmarks.md.
pkg_check_modules(BENCH_RELAY_RDKAFKA REQUIRED IMPORTED_TARGET rdkafka)
add_executable(bench_relay ${CMAKE_CURRENT_LIST_DIR}/bench_relay.c)
target_link_libraries(bench_relay PRIVATE order_lib svc_rpc shopmicro_proto
                      PkgConfig::BENCH_RELAY_RDKAFKA PkgConfig::LIBPQ Threads::Threads svc_warnings)
