/* SPDX-License-Identifier: Apache-2.0 */
/* conf.c - see conf.h. */
#include "conf.h"

svc_err_t kfk__conf_apply(rd_kafka_conf_t *conf, const char *who, const char *const (*kv)[2],
                          size_t n, char errbuf[static SVC_ERRBUF_LEN])
{
    char why[256];

    for (size_t i = 0; i < n; i++) {
        if (rd_kafka_conf_set(conf, kv[i][0], kv[i][1], why, sizeof why) != RD_KAFKA_CONF_OK) {
            svc_errbuf_set(errbuf, "kafka %s: %s=%s: %s", who, kv[i][0], kv[i][1], why);
            return SVC_EINVAL;
        }
    }
    return SVC_OK;
}
