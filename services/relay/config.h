/* SPDX-License-Identifier: Apache-2.0 */
/* config.h - the relay's settings (see config.c for the table). */
#ifndef RLY_CONFIG_H
#define RLY_CONFIG_H

#include <stdio.h>

#include "svc/core.h"

typedef struct rly_config {
    char db_dsn[SVC_CFG_STR_MAX];
    char kafka_brokers[SVC_CFG_STR_MAX];
    char name[SVC_CFG_STR_MAX];
    char log_level[SVC_CFG_STR_MAX];
    svc_mem_cfg_t mem; /* RELAY_MALLOC_ARENAS, RELAY_MALLOC_TRIM */
    char admin_listen[SVC_CFG_STR_MAX];
    int64_t batch_size;
    int64_t poll_interval_ms;
    int64_t drain_ms;
    int64_t db_statement_timeout_ms;
    int64_t kafka_linger_ms;
    int64_t kafka_delivery_timeout_ms;
    int64_t backoff_base_ms;
    int64_t backoff_cap_ms;
    int64_t retention_s;
    int64_t prune_interval_ms;
} rly_config_t;

/* Reads the environment. SVC_EINVAL with the reason in errbuf. */
svc_err_t rly_config_load(rly_config_t *c, char errbuf[static SVC_ERRBUF_LEN]);
void rly_config_help(FILE *f);
void rly_config_log(const rly_config_t *c);

#endif
