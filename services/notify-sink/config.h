/* SPDX-License-Identifier: Apache-2.0 */
/* config.h - the notify-sink's settings (the table is in config.c). */
#ifndef NSK_CONFIG_H
#define NSK_CONFIG_H

#include <stdio.h>

#include "svc/core.h"

typedef struct nsk_config {
    char listen[SVC_CFG_STR_MAX];
    char secret[SVC_CFG_STR_MAX];
    char secret_file[SVC_CFG_STR_MAX];
    char log_level[SVC_CFG_STR_MAX];
    int64_t tolerance_s;
    int64_t max_records;
    int64_t max_body_bytes;
    int64_t max_conns;
    int64_t idle_timeout_ms;
} nsk_config_t;

/* Reads the environment (getenv_fn NULL: getenv). SVC_EINVAL with the
 * reason in errbuf. */
svc_err_t nsk_config_load(nsk_config_t *c, const char *(*getenv_fn)(const char *),
                          char errbuf[static SVC_ERRBUF_LEN]);
void nsk_config_help(FILE *f);
/* One start-up line with every setting but the secret. */
void nsk_config_log(const nsk_config_t *c);

#endif
