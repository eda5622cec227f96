# Applied to every target (ours and generated) so that the whole binary is
# instrumented; a half-instrumented binary gives false reports.
if(SVC_SANITIZE STREQUAL "address")
  add_compile_options(-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(SVC_SANITIZE STREQUAL "thread")
  add_compile_options(-O1 -g -fno-omit-frame-pointer -fsanitize=thread)
  add_link_options(-fsanitize=thread)
elseif(NOT SVC_SANITIZE STREQUAL "")
  message(FATAL_ERROR "SVC_SANITIZE must be '', 'address' or 'thread' (got '${SVC_SANITIZE}')")
endif()
