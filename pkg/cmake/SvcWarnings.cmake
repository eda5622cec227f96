# svc_warnings: the warning set for our own code. Generated protobuf-c code
# does not link it (it is compiled as a separate target).
add_library(svc_warnings INTERFACE)
target_compile_options(svc_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wformat=2 -Wpointer-arith -Wundef
  # C only (g++ warns that they do not apply; pkg/rpc/src/absl_quiet.cc is C++)
  "$<$<COMPILE_LANGUAGE:C>:-Wstrict-prototypes;-Wmissing-prototypes;-Wold-style-definition>"
  -Wwrite-strings -Wvla -Wimplicit-fallthrough -Wno-unused-parameter
  "$<$<COMPILE_LANGUAGE:C>:-Werror=implicit-function-declaration;-Werror=incompatible-pointer-types>"
  $<$<BOOL:${SVC_WERROR}>:-Werror>)
target_compile_definitions(svc_warnings INTERFACE _POSIX_C_SOURCE=200809L _DEFAULT_SOURCE)
