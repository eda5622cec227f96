/* SPDX-License-Identifier: Apache-2.0 */
/* config.h - the order service's settings (see config.c for the table). */
#ifndef ORD_CONFIG_H
#define ORD_CONFIG_H

#include <stdio.h>

#include "kafka/worker.h"
#include "svc/core.h"

typedef struct ord_config {
    char listen[SVC_CFG_STR_MAX];
    char db_dsn[SVC_CFG_STR_MAX];
    int64_t workers;
    char log_level[SVC_CFG_STR_MAX];
    svc_mem_cfg_t mem; /* ORDER_MALLOC_ARENAS, ORDER_MALLOC_TRIM */
    int64_t drain_ms;
    int64_t db_statement_timeout_ms;
    int64_t db_startup_wait_ms;

    /* The catalog client (pkg/resilience's gRPC binding). */
    char catalog_addr[SVC_CFG_STR_MAX];
    int64_t catalog_attempt_timeout_ms;
    int64_t catalog_max_attempts;
    int64_t catalog_backoff_base_ms;
    int64_t catalog_backoff_cap_ms;
    int64_t catalog_breaker_failures;
    int64_t catalog_breaker_cooldown_ms;
    int64_t catalog_max_concurrent;

    /* Idempotency keys. */
    int64_t idempotency_ttl_s;
    int64_t idempotency_cleanup_every;

    /* The saga's consumer of shopmicro.inventory.v1 ("" brokers: none). */
    kfk_worker_cfg_t saga; /* ORDER_KAFKA_BROKERS, ORDER_CONSUMER_* */
    char admin_listen[SVC_CFG_STR_MAX];
} ord_config_t;

/* Reads the environment. SVC_EINVAL with the reason in errbuf. */
svc_err_t ord_config_load(ord_config_t *c, char errbuf[static SVC_ERRBUF_LEN]);
void ord_config_help(FILE *f);
void ord_config_log(const ord_config_t *c);

#endif
