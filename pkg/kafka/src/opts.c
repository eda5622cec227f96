/* SPDX-License-Identifier: Apache-2.0 */
/* opts.c - the producer's options (defaults, validation) and error mapping. */
#include <librdkafka/rdkafka.h>
#include <string.h>

#include "kafka/kafka.h"

void kfk_producer_opts_init(kfk_producer_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->client_id = KFK_DEFAULT_CLIENT_ID;
    o->acks = KFK_DEFAULT_ACKS;
    o->idempotence = KFK_DEFAULT_IDEMPOTENCE;
    o->linger_ms = KFK_DEFAULT_LINGER_MS;
    o->delivery_timeout_ms = KFK_DEFAULT_DELIVERY_TIMEOUT_MS;
    o->queue_max_msgs = KFK_DEFAULT_QUEUE_MAX_MSGS;
}

static bool in_range(int v, int lo, int hi)
{
    return v >= lo && v <= hi;
}

svc_err_t kfk_producer_opts_validate(const kfk_producer_opts_t *o,
                                     char errbuf[static SVC_ERRBUF_LEN])
{
    const char *bad = NULL;

    if (o->brokers == NULL || o->brokers[0] == '\0')
        bad = "brokers is required";
    else if (o->client_id == NULL || o->client_id[0] == '\0')
        bad = "client_id is required";
    else if (o->acks == NULL || (strcmp(o->acks, "all") != 0 && strcmp(o->acks, "1") != 0 &&
                                 strcmp(o->acks, "0") != 0))
        bad = "acks must be all, 1 or 0";
    /* librdkafka refuses the combination too, but with a message about
     * "enable.idempotence" that does not say which of our options to change. */
    else if (o->idempotence && strcmp(o->acks, "all") != 0)
        bad = "idempotence needs acks=all";
    else if (!in_range(o->linger_ms, 0, 60000))
        bad = "linger_ms must be 0..60000";
    else if (!in_range(o->delivery_timeout_ms, 1000, 3600000))
        bad = "delivery_timeout_ms must be 1000..3600000";
    else if (!in_range(o->queue_max_msgs, 1, 10000000))
        bad = "queue_max_msgs must be 1..10000000";
    else if (o->on_delivery == NULL)
        bad = "on_delivery is required";
    if (bad == NULL)
        return SVC_OK;
    svc_errbuf_set(errbuf, "kafka producer: %s", bad);
    return SVC_EINVAL;
}

svc_err_t kfk_err_from_rd(int rd_err)
{
    switch ((rd_kafka_resp_err_t)rd_err) {
    case RD_KAFKA_RESP_ERR_NO_ERROR:
        return SVC_OK;
    /* The broker is away or slow: the message may go through later. */
    case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
    case RD_KAFKA_RESP_ERR__PURGE_QUEUE:
    case RD_KAFKA_RESP_ERR__PURGE_INFLIGHT:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
    case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION:
        return SVC_EUNAVAIL;
    case RD_KAFKA_RESP_ERR__QUEUE_FULL:
        return SVC_EEXHAUSTED;
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
        return SVC_ENOTFOUND;
    /* The message itself: sending it again fails again (the relay sets
     * such a row aside, services/relay/batch.c). */
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_INVALID_MSG:
    case RD_KAFKA_RESP_ERR_INVALID_RECORD:
    case RD_KAFKA_RESP_ERR__INVALID_ARG:
        return SVC_EINVAL;
    default:
        return SVC_EINTERNAL;
    }
}
