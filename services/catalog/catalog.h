/* SPDX-License-Identifier: Apache-2.0 */
/* catalog.h - what the catalog's files share: the method table and the runner. */
#ifndef CAT_CATALOG_H
#define CAT_CATALOG_H

#include "config.h"
#include "fault.h"
#include "rpc/rpc.h"

/* What every call shares (rpc_ctx_app). Borrowed; outlives the server. */
typedef struct cat_app {
    const cat_config_t *cfg;
    cat_fault_t *fault; /* NULL unless CATALOG_FAULT_KNOBS=on */
} cat_app_t;

/* rpc.c: the CatalogService methods. Per-worker state must be a cat_store_t;
 * the app (rpc_ctx_app) a cat_app_t, or NULL (no fault knobs). */
extern const rpc_method_t cat_methods[];
extern const size_t cat_methods_count;

/* server.c: migrates, serves until SIGTERM/SIGINT, drains. Returns the
 * process exit status. */
int cat_server_run(const cat_config_t *cfg);

#endif
