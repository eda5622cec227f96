# svc_unit_test(name src...): one cmocka executable, labelled "unit", with a
# timeout. Unit tests never sleep and never touch the network.
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
  set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT ${t})
endfunction()
