# svc_embed_migrations(target dir symbol [shared.sql...]): turns dir/*.sql and
# the extra files given (all sorted by file name, e.g. 0001_init.sql) into a
# generated C file defining
#   const db_migration_t <symbol>[]; const size_t <symbol>_count;
# so that SQL lives in .sql files but ships inside the binary. The extra files
# are migrations two services share (the relay's schema of every outbox).
function(svc_embed_migrations target dir symbol)
  file(GLOB found CONFIGURE_DEPENDS "${dir}/*.sql")
  set(keyed "")
  foreach(f ${found} ${ARGN})
    get_filename_component(name "${f}" NAME)
    list(APPEND keyed "${name}|${f}")
  endforeach()
  list(SORT keyed)
  set(sql_files "")
  foreach(k ${keyed})
    string(REGEX REPLACE "^[^|]*\\|" "" f "${k}")
    list(APPEND sql_files "${f}")
  endforeach()
  set(out "${CMAKE_CURRENT_BINARY_DIR}/${symbol}.c")
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DSYMBOL=${symbol} "-DFILES=${sql_files}"
            -P ${PROJECT_SOURCE_DIR}/pkg/cmake/embed_sql.cmake
    DEPENDS ${sql_files} ${PROJECT_SOURCE_DIR}/pkg/cmake/embed_sql.cmake
    VERBATIM)
  target_sources(${target} PRIVATE ${out})
endfunction()
