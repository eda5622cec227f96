/* SPDX-License-Identifier: Apache-2.0 */
/* config.h - the notification service's settings (the table is in config.c). */
#ifndef NTF_CONFIG_H
#define NTF_CONFIG_H

#include <stdio.h>

#include "kafka/worker.h"
#include "mq/mq.h"
#include "svc/core.h"

typedef struct ntf_config {
    kfk_worker_cfg_t events; /* the consumer of shopmicro.orders.v1  */
    char rabbitmq_host[SVC_CFG_STR_MAX];
    int64_t rabbitmq_port;
    char rabbitmq_user[SVC_CFG_STR_MAX];
    char rabbitmq_password[SVC_CFG_STR_MAX];
    char rabbitmq_vhost[SVC_CFG_STR_MAX];
    char queue_base[SVC_CFG_STR_MAX];
    char retry_tiers_ms[SVC_CFG_STR_MAX]; /* "1000,10000,60000"                 */
    char webhook_url[SVC_CFG_STR_MAX];
    char webhook_secret[SVC_CFG_STR_MAX];
    char webhook_secret_file[SVC_CFG_STR_MAX];
    int64_t workers;
    int64_t prefetch;
    int64_t job_deadline_ms;
    int64_t attempt_timeout_ms;
    int64_t max_attempts;
    int64_t breaker_failures;
    int64_t breaker_cooldown_ms;
    char admin_listen[SVC_CFG_STR_MAX];
    char log_level[SVC_CFG_STR_MAX];
    svc_mem_cfg_t mem; /* NOTIFY_MALLOC_ARENAS, NOTIFY_MALLOC_TRIM */
    /* Parsed from retry_tiers_ms by ntf_config_load. */
    uint32_t tiers[RMQ_MAX_TIERS];
    size_t n_tiers;
} ntf_config_t;

/* Reads the environment. SVC_EINVAL with the variable and the reason in
 * errbuf. */
svc_err_t ntf_config_load(ntf_config_t *c, char errbuf[static SVC_ERRBUF_LEN]);
void ntf_config_help(FILE *f);
void ntf_config_log(const ntf_config_t *c);

/* The RabbitMQ connection options of c (strings borrowed from c); name is
 * the connection_name rabbitmqctl shows. */
void ntf_config_conn_opts(const ntf_config_t *c, const char *name, rmq_conn_opts_t *o);
/* The topology of c (borrows c's base name and tiers). */
void ntf_config_topology(const ntf_config_t *c, rmq_topology_t *t);

/* "1000,10000,60000" into tiers (1..RMQ_MAX_TIERS delays, each 1..86400000
 * ms, rising). Pure; for tests. */
svc_err_t ntf_parse_tiers(const char *text, uint32_t *tiers, size_t *n,
                          char errbuf[static SVC_ERRBUF_LEN]);

#endif
