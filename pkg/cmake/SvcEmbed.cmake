# svc_embed_migrations(target dir symbol): turns dir/*.sql (sorted by name,
# e.g. 0001_init.sql) into a generated C file defining
#   const db_migration_t <symbol>[]; const size_t <symbol>_count;
# so that SQL lives in .sql files but ships inside the binary.
function(svc_embed_migrations target dir symbol)
  file(GLOB sql_files CONFIGURE_DEPENDS "${dir}/*.sql")
  list(SORT sql_files)
  set(out "${CMAKE_CURRENT_BINARY_DIR}/${symbol}.c")
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DSYMBOL=${symbol} "-DFILES=${sql_files}"
            -P ${PROJECT_SOURCE_DIR}/pkg/cmake/embed_sql.cmake
    DEPENDS ${sql_files} ${PROJECT_SOURCE_DIR}/pkg/cmake/embed_sql.cmake
    VERBATIM)
  target_sources(${target} PRIVATE ${out})
endfunction()
