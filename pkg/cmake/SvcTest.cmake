# svc_unit_test(name src...): one cmocka executable, labelled "unit", with a
# timeout. A unit test starts no other process and needs no server: what it
# talks to over loopback is a fake in its own process (test_db_verdict's
# Postgres, test_rpc_client_retries' HTTP/2 peer) or a port where nothing
# listens (127.0.0.1:1: connection refused); a real server makes it an
# integration test. The waits it makes are short, and bounds on them are
# scaled by SVC_TEST_TIMEOUT_MULTIPLIER (tests/support/scale.h), which every
# test gets in its environment.
set(SVC_TEST_TIMEOUT_MULTIPLIER 1)
if(NOT SVC_SANITIZE STREQUAL "")
  set(SVC_TEST_TIMEOUT_MULTIPLIER 4)
endif()

function(svc_unit_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} PkgConfig::CMOCKA svc_warnings)
  add_test(NAME ${name} COMMAND ${name})
  math(EXPR t "20 * ${SVC_TEST_TIMEOUT_MULTIPLIER}")
  set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT ${t}
    ENVIRONMENT "SVC_TEST_TIMEOUT_MULTIPLIER=${SVC_TEST_TIMEOUT_MULTIPLIER}")
endfunction()
