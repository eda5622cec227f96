# svc_warnings: the warning set for our own code. Generated protobuf-c code
# does not link it (it is compiled as a separate target).
add_library(svc_warnings INTERFACE)
target_compile_options(svc_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes
  -Wold-style-definition -Wformat=2 -Wpointer-arith -Wundef
  -Wwrite-strings -Wvla -Wimplicit-fallthrough -Wno-unused-parameter
  -Werror=implicit-function-declaration -Werror=incompatible-pointer-types
  $<$<BOOL:${SVC_WERROR}>:-Werror>)
target_compile_definitions(svc_warnings INTERFACE _POSIX_C_SOURCE=200809L _DEFAULT_SOURCE)
