/* SPDX-License-Identifier: Apache-2.0 */
/*
 * publish.h - the Kafka side of the notification service: the handler that
 * turns each OrderConfirmed / OrderCancelled of shopmicro.orders.v1 into a
 * job on RabbitMQ, and answers KFK_HANDLED only after the broker confirmed
 * it, so the consumer commits the offset only then (kafka/worker.h). A
 * publish that fails answers KFK_RETRY: the worker pauses the partition and
 * hands the record again, and the job is published again (the same
 * message-id: receivers dedupe on it).
 *
 * Threads: the publisher and its connection belong to the Kafka worker's
 * thread (the handler), after ntf_publisher_new on main's.
 */
#ifndef NTF_PUBLISH_H
#define NTF_PUBLISH_H

#include "config.h"
#include "kafka/consumer.h"
#include "stats.h"

typedef struct ntf_publisher ntf_publisher_t; /* opaque */

/* Makes the publisher and tries once to connect and declare the topology:
 * a broker that is down is not an error here (the first record connects,
 * and stats say why it is down). cfg and stats are borrowed and must
 * outlive it. SVC_ENOMEM only. */
svc_err_t ntf_publisher_new(const ntf_config_t *cfg, ntf_stats_t *stats, ntf_publisher_t **out);
/* NULL-safe; after the Kafka worker stopped. */
void ntf_publisher_free(ntf_publisher_t *p);

/* The kfk_handler_fn (ctx: the publisher). */
kfk_verdict_t ntf_publisher_handle(void *ctx, const kfk_record_t *r, char *reason);

/* Connects to RabbitMQ and declares cfg's topology (idempotent): the one
 * way every part of the service gets a ready connection. *out owned by
 * caller (rmq_conn_free). */
svc_err_t ntf_connect(const ntf_config_t *cfg, const char *name, rmq_conn_t **out,
                      char errbuf[static SVC_ERRBUF_LEN]);

#endif
