/* SPDX-License-Identifier: Apache-2.0 */
/* config.h - the gateway's settings (see config.c for the table). */
#ifndef GW_CONFIG_H
#define GW_CONFIG_H

#include <stdbool.h>
#include <stdio.h>

#include "svc/core.h"

typedef struct gw_config {
    char listen[SVC_CFG_STR_MAX];
    char admin_listen[SVC_CFG_STR_MAX]; /* "none": no admin port */
    int64_t threads; /* 0 in the environment: one per core (resolved by gw_config_load) */
    char catalog_addr[SVC_CFG_STR_MAX];
    char order_addr[SVC_CFG_STR_MAX];
    int64_t default_timeout_ms; /* 0: no deadline */
    int64_t max_body_bytes;
    int64_t max_metadata_bytes; /* forwarded headers, as gRPC counts them */
    int64_t idle_timeout_ms;
    int64_t max_connections; /* all loops together */
    int64_t drain_ms;
    svc_mem_cfg_t mem; /* GATEWAY_MALLOC_ARENAS, GATEWAY_MALLOC_TRIM */
    char log_level[SVC_CFG_STR_MAX];
    char lock_dir[SVC_CFG_STR_MAX]; /* "none": no lock file */
    int64_t attempt_timeout_ms;
    int64_t max_attempts;
    int64_t backoff_base_ms;
    int64_t backoff_cap_ms;
    int64_t breaker_failures;
    int64_t breaker_cooldown_ms;
    int64_t max_concurrent;
    bool stale_reads; /* docs/gateway.md, "Stale reads" */
    int64_t stale_max_age_ms;
    int64_t stale_max_entries;
    int64_t stale_max_bytes;
    bool failfast; /* docs/gateway.md, "Fail-fast windows" */
    int64_t failfast_max_window_ms;
    char jwks_file[SVC_CFG_STR_MAX]; /* door.h; "": no token can be verified */
    bool public_reads;
    char jwt_issuer[SVC_CFG_STR_MAX];
    char jwt_audience[SVC_CFG_STR_MAX];
    int64_t jwt_leeway_s;
    int64_t jwt_cache_entries;
    char rate_limits[SVC_CFG_STR_MAX]; /* ratelimit.h's spec, or "off" */
    int64_t rate_limit_capacity;
    char cors_origins[SVC_CFG_STR_MAX];     /* cors.h; "" or "none": no CORS */
    char resilience_peers[SVC_CFG_STR_MAX]; /* the live page's other feeds (resilience.h) */
} gw_config_t;

/* Reads the environment (getenv_fn NULL: getenv; tests inject). SVC_EINVAL
 * with the reason in errbuf. */
svc_err_t gw_config_load(gw_config_t *c, const char *(*getenv_fn)(const char *name),
                         char errbuf[static SVC_ERRBUF_LEN]);
void gw_config_help(FILE *f);
void gw_config_log(const gw_config_t *c);

#endif
