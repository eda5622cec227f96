# bench_notify: the notification benchmark's tools (issue 14): the bare
# pkg/mq publish-and-consume loop, jobs into the service's work queue,
# OrderConfirmed records to Kafka, open-loop CreateOrder through the gateway,
# and the join of orders, outbox rows and the sink's log for the end-to-end
# latency. Job bodies come from the service's own ntf_job_from_record. Run
# through bench/run_notify_bench.sh; see docs/benchmarks.md.
find_package(CURL REQUIRED)
add_executable(bench_notify ${CMAKE_CURRENT_LIST_DIR}/bench_notify.c
               ${CMAKE_CURRENT_LIST_DIR}/bench_notify_e2e.c)
target_link_libraries(bench_notify PRIVATE notification_lib CURL::libcurl Threads::Threads
                      svc_warnings)
