# The gateway's bearer-token check (issue 36): JWKS key sets, the JWT
# verifier, its per-loop cache and the reloading holder (auth.h), plus the
# signer that only the local stack's tool and the tests use. Its own
# library, so that the gateway links it once dispatch.c asks for it and the
# unit tests and the benchmark link it alone. Included by CMakeLists.txt.
# GLOBAL: tests/fuzz links PkgConfig::JANSSON too (fuzz_jwt).
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET GLOBAL jansson)

add_library(gateway_auth STATIC
  ${CMAKE_CURRENT_LIST_DIR}/b64url.c ${CMAKE_CURRENT_LIST_DIR}/jwks.c
  ${CMAKE_CURRENT_LIST_DIR}/jwt.c ${CMAKE_CURRENT_LIST_DIR}/jwt_cache.c
  ${CMAKE_CURRENT_LIST_DIR}/auth.c)
target_include_directories(gateway_auth PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(gateway_auth PUBLIC svc_core svc_principal PkgConfig::JANSSON OpenSSL::Crypto
                      Threads::Threads m PRIVATE svc_warnings)

add_library(gateway_jwt_sign STATIC ${CMAKE_CURRENT_LIST_DIR}/jwt_sign.c)
target_link_libraries(gateway_jwt_sign PUBLIC gateway_auth PRIVATE svc_warnings)

# build/gateway/shopmicro-jwt: deploy/local/stack.sh's key and `token`.
add_executable(shopmicro-jwt ${CMAKE_CURRENT_LIST_DIR}/tools/jwt_tool.c)
target_link_libraries(shopmicro-jwt PRIVATE gateway_jwt_sign svc_warnings)
