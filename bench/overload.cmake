# bench_overload: the open-loop overload experiment (issue 15, docs/overload.md),
# naive retries against pkg/resilience's gRPC binding. Its run loop is a library
# so that the smoke test (tests/integration/test_overload_smoke.c) runs the same code.
add_library(overload_lib STATIC ${CMAKE_CURRENT_LIST_DIR}/overload/overload.c
            ${CMAKE_CURRENT_LIST_DIR}/overload/knobs.c)
target_include_directories(overload_lib PUBLIC ${CMAKE_CURRENT_LIST_DIR}/overload)
target_link_libraries(overload_lib PUBLIC svc_resilience_grpc svc_rpc shopmicro_proto Threads::Threads
                      PRIVATE svc_warnings)
add_executable(bench_overload ${CMAKE_CURRENT_LIST_DIR}/overload/main.c)
target_link_libraries(bench_overload PRIVATE overload_lib svc_warnings)
