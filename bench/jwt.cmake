# bench_jwt: the bearer-token check's CPU per request (issue 36): a token verified
# from scratch (signature and claims) next to the same token answered from a loop's
# cache (SHA-256 and a lookup), for ES256 and RS256, in one run. No server. Included
# (OPTIONAL) by bench/CMakeLists.txt.
add_executable(bench_jwt ${CMAKE_CURRENT_LIST_DIR}/bench_jwt.c)
target_link_libraries(bench_jwt PRIVATE gateway_jwt_sign svc_warnings)
