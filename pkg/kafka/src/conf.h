/* SPDX-License-Identifier: Apache-2.0 */
/* conf.h - librdkafka configuration as the producer and the consumer both
 * write it: a table of name/value pairs, the first refusal returned. */
#ifndef KFK_CONF_H
#define KFK_CONF_H

#include <librdkafka/rdkafka.h>

#include "svc/core.h"

/* Sets kv[0..n) on conf; SVC_EINVAL with "kafka <who>: name=value: why" in
 * errbuf at the first one librdkafka refuses. */
svc_err_t kfk__conf_apply(rd_kafka_conf_t *conf, const char *who, const char *const (*kv)[2],
                          size_t n, char errbuf[static SVC_ERRBUF_LEN]);

#endif
