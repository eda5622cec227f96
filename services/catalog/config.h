/* SPDX-License-Identifier: Apache-2.0 */
/* config.h - the catalog service's settings (see config.c for the table). */
#ifndef CAT_CONFIG_H
#define CAT_CONFIG_H

#include <stdio.h>

#include "kafka/worker.h"
#include "svc/core.h"

typedef struct cat_config {
    char listen[SVC_CFG_STR_MAX];
    char db_dsn[SVC_CFG_STR_MAX];
    int64_t workers;
    char log_level[SVC_CFG_STR_MAX];
    svc_mem_cfg_t mem; /* CATALOG_MALLOC_ARENAS, CATALOG_MALLOC_TRIM */
    int64_t drain_ms;
    int64_t db_statement_timeout_ms;
    int64_t db_startup_wait_ms;
    kfk_worker_cfg_t saga; /* CATALOG_KAFKA_BROKERS, CATALOG_CONSUMER_* */
    char admin_listen[SVC_CFG_STR_MAX];
    bool fault_knobs; /* test-only: /debug/fault on the admin port */
} cat_config_t;

/* Reads the environment. SVC_EINVAL with the reason in errbuf. */
svc_err_t cat_config_load(cat_config_t *c, char errbuf[static SVC_ERRBUF_LEN]);
void cat_config_help(FILE *f);
void cat_config_log(const cat_config_t *c);

#endif
