# svc_module_testing(lib): lib_testing, the module lib plus its private
# headers (src/), for the tests that drive the module's internals: its own
# unit tests, and a service's tests that call a handler through pkg/rpc's
# rpc__dispatch. Only targets under tests/ link it; no test names a src/
# directory itself (tests/lint/check_private_headers.py).
function(svc_module_testing lib)
  add_library(${lib}_testing INTERFACE)
  target_include_directories(${lib}_testing INTERFACE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_link_libraries(${lib}_testing INTERFACE ${lib})
endfunction()
