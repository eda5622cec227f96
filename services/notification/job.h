/* SPDX-License-Identifier: Apache-2.0 */
/*
 * job.h - what a notification job is, and what becomes of it after a
 * delivery attempt. Pure functions, no I/O: the unit tests cover them.
 *
 * A job's body is the webhook's body: the order event as a CloudEvent in
 * structured JSON mode (application/cloudevents+json), its data the event's
 * protojson, so a receiver reads id, type, time and data without knowing
 * protobuf. The job's message-id, the webhook's Idempotency-Key and its
 * webhook-id are the event's ce_id: a receiver dedupes on it, whichever of
 * the at-least-once steps (relay, Kafka consumer, RabbitMQ) repeated it.
 */
#ifndef NTF_JOB_H
#define NTF_JOB_H

#include <stdbool.h>
#include <stddef.h>

#include "kafka/consumer.h"
#include "rs/http.h"

#define NTF_TOPIC          "shopmicro.orders.v1"
#define NTF_TYPE_CREATED   "shopmicro.order.v1.OrderCreated"
#define NTF_TYPE_CONFIRMED "shopmicro.order.v1.OrderConfirmed"
#define NTF_TYPE_CANCELLED "shopmicro.order.v1.OrderCancelled"
#define NTF_CONTENT_TYPE   "application/cloudevents+json"
#define NTF_HDR_TYPE       "x-shopmicro-event-type" /* a job's header: its ce_type */

/* What the consumer makes of one record of NTF_TOPIC. */
typedef enum ntf_kind {
    NTF_JOB,    /* a job to publish: body filled            */
    NTF_SKIP,   /* an event nobody is notified of (created) */
    NTF_POISON, /* can never become a job: reason filled    */
} ntf_kind_t;

/*
 * Reads r (ce_id, ce_type, ce_source, ce_time headers, protobuf value) and,
 * for OrderConfirmed / OrderCancelled, writes the job's body into *body
 * (malloc'd, NUL-terminated, owned by caller: free) and its length. reason
 * gets KFK_REASON_LEN bytes for NTF_POISON: no usable ce_id, an unknown or
 * newer ce_type, an undecodable value.
 */
ntf_kind_t ntf_job_from_record(const kfk_record_t *r, char **body, size_t *len, char *reason);

/* What a delivery's outcome asks for. */
typedef enum ntf_next {
    NTF_ACK,     /* delivered (2xx): the job is done                          */
    NTF_RETRY,   /* transient (5xx, 429, no answer, breaker open, budget):
                    the next retry tier, or the dead-letter queue after the last */
    NTF_DEAD,    /* the receiver refused it for good (4xx but 408/425/429):
                    the dead-letter queue at once                             */
    NTF_REQUEUE, /* we are stopping: not settled, RabbitMQ hands it again     */
} ntf_next_t;

ntf_next_t ntf_next_of(const rs_http_result_t *res);

/* The reason a dead job carries (x-shopmicro-final-reason): "http-4xx" for
 * NTF_DEAD, else the chain's reason name ("attempts-exhausted",
 * "breaker-open", ...), "http-<status>" when it ended on a status the chain
 * calls ok. */
void ntf_dead_reason(const rs_http_result_t *res, ntf_next_t next, char *out, size_t cap);

#endif
