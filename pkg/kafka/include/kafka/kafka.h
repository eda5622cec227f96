/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kafka/kafka.h - Apache Kafka through librdkafka, the way ShopMicro needs it.
 *
 * Today: a producer for the outbox relay. It is idempotent by default
 * (enable.idempotence=true, acks=all: the broker drops a retried duplicate,
 * and per partition the order of kfk_produce calls is kept), reports every
 * message's outcome once through a delivery callback fired from
 * kfk_producer_poll(), and returns every error with its reason in errbuf.
 * Also the CloudEvents Kafka binding (binary mode) header set, as a pure
 * function, so that every producer of events writes the same headers.
 *
 * The consumer (manual offset commit after the handler is done, retries,
 * rebalances) and the dead-letter topic are in kafka/consumer.h, which
 * includes this header: one module, two headers, so that each stays
 * readable.
 *
 * Names: kfk_ (never rd_kafka_, which is librdkafka's). The library writes
 * nothing to stderr: librdkafka's own log lines go to opts.on_log.
 */
#ifndef KFK_KAFKA_H
#define KFK_KAFKA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "svc/core.h"

/* One record header. value may hold any bytes; len is its length. */
typedef struct kfk_header {
    const char *name;  /* non-empty, NUL-terminated */
    const void *value; /* len bytes; may be NULL when len is 0 */
    size_t len;
} kfk_header_t;

#define KFK_MAX_HEADERS 32

/* ------------------------------------------------------------------------
 * CloudEvents Kafka protocol binding, binary mode (cloudevents.io spec
 * kafka-protocol-binding 1.0): the record's value is the event data, its
 * attributes are headers named ce_<attribute>, and content-type names the
 * data's media type.
 * ------------------------------------------------------------------------ */
typedef struct kfk_ce {
    const char *id;           /* ce_id: unique per source; consumers dedupe on it */
    const char *type;         /* ce_type, e.g. shopmicro.order.v1.OrderCreated  */
    const char *source;       /* ce_source, a URI-reference: /shopmicro/order   */
    const char *time;         /* ce_time, RFC 3339; NULL or "": no header       */
    const char *content_type; /* content-type; NULL: KFK_CE_DEFAULT_CONTENT_TYPE */
    const char *request_id;   /* x-request-id; NULL or "": no header            */
} kfk_ce_t;

#define KFK_CE_SPECVERSION          "1.0"
#define KFK_CE_DEFAULT_CONTENT_TYPE "application/protobuf"
#define KFK_CE_MAX_HEADERS          7

/*
 * Fills out[] (KFK_CE_MAX_HEADERS entries) with ce_specversion, ce_id,
 * ce_type, ce_source, then ce_time, content-type and x-request-id, and sets
 * *n. The values point into ce (borrowed). SVC_EINVAL naming the attribute
 * when id, type or source is missing or empty. Pure; thread-safe.
 */
svc_err_t kfk_ce_headers(const kfk_ce_t *ce, kfk_header_t out[KFK_CE_MAX_HEADERS], size_t *n,
                         char errbuf[static SVC_ERRBUF_LEN]);

/* ------------------------------------------------------------------------
 * Producer
 * ------------------------------------------------------------------------ */
typedef struct kfk_producer kfk_producer_t; /* opaque */

/*
 * The outcome of one message, called from kfk_producer_poll() (or
 * kfk_producer_free) on the polling thread, exactly once per message that
 * kfk_produce accepted (never for one it refused). err is SVC_OK when the
 * broker acknowledged it (with acks=all: every in-sync replica has it);
 * otherwise SVC_EUNAVAIL (broker unreachable, timed out), SVC_ENOTFOUND
 * (unknown topic), SVC_EINVAL (too large, bad record) or SVC_EINTERNAL, with
 * librdkafka's text in reason.
 */
typedef void (*kfk_delivery_fn)(void *ctx, void *msg_opaque, svc_err_t err, const char *reason);
/* librdkafka's log lines (syslog levels: 3 error, 4 warning, ... 7 debug). */
typedef void (*kfk_log_fn)(void *ctx, int level, const char *facility, const char *text);

#define KFK_DEFAULT_ACKS        "all"
#define KFK_DEFAULT_IDEMPOTENCE true
/* Small: a batch of outbox rows goes out in one request, yet a lone event
 * waits at most this long. */
#define KFK_DEFAULT_LINGER_MS 5
/* How long librdkafka keeps retrying a message before reporting it failed
 * (librdkafka's own default is 300 s; an outbox row can wait for the next
 * batch, so a report within seconds is worth more). */
#define KFK_DEFAULT_DELIVERY_TIMEOUT_MS 10000
/* Messages in flight or queued at most (librdkafka: 100000). */
#define KFK_DEFAULT_QUEUE_MAX_MSGS 100000
#define KFK_DEFAULT_CLIENT_ID      "shopmicro"

typedef struct kfk_producer_opts {
    const char *brokers;         /* bootstrap.servers, "host:port[,host:port]"; required */
    const char *client_id;       /* KFK_DEFAULT_CLIENT_ID                              */
    const char *acks;            /* "all" | "1" | "0"; KFK_DEFAULT_ACKS                */
    bool idempotence;            /* KFK_DEFAULT_IDEMPOTENCE (needs acks=all)           */
    int linger_ms;               /* 0..60000; KFK_DEFAULT_LINGER_MS                    */
    int delivery_timeout_ms;     /* 1000..3600000; KFK_DEFAULT_DELIVERY_TIMEOUT_MS     */
    int queue_max_msgs;          /* 1..10000000; KFK_DEFAULT_QUEUE_MAX_MSGS            */
    kfk_delivery_fn on_delivery; /* required                                         */
    kfk_log_fn on_log;           /* NULL: librdkafka's lines are dropped               */
    void *ctx;                   /* passed to both callbacks                           */
} kfk_producer_opts_t;

/* Fills o with the defaults above (no brokers, no callbacks). */
void kfk_producer_opts_init(kfk_producer_opts_t *o);
/* SVC_EINVAL naming the first bad option in errbuf. Pure; thread-safe. */
svc_err_t kfk_producer_opts_validate(const kfk_producer_opts_t *o,
                                     char errbuf[static SVC_ERRBUF_LEN]);

/* Validates o and creates the producer (it connects in the background: a
 * broker that is down is not an error here). On SVC_OK *out is owned by
 * caller (kfk_producer_free). Strings of o are copied. */
svc_err_t kfk_producer_new(const kfk_producer_opts_t *o, kfk_producer_t **out,
                           char errbuf[static SVC_ERRBUF_LEN]);

/* Waits up to timeout_ms for the messages still queued or in flight (their
 * reports fire), then destroys the producer; reports of messages still
 * undelivered then fire with SVC_EUNAVAIL ("purged"). NULL-safe. */
void kfk_producer_free(kfk_producer_t *p, int timeout_ms);

/* One message. Bytes are copied by kfk_produce; nothing is borrowed after
 * it returns. */
typedef struct kfk_message {
    const char *topic;
    const void *key; /* may be NULL (then len 0): no key */
    size_t key_len;
    const void *value;
    size_t value_len;
    const kfk_header_t *headers; /* n_headers (<= KFK_MAX_HEADERS) entries */
    size_t n_headers;
    void *opaque; /* handed to on_delivery */
} kfk_message_t;

/*
 * Queues m. SVC_OK: its delivery report will fire. Otherwise it will not:
 * SVC_EEXHAUSTED (queue full: poll, then try again), SVC_ENOTFOUND (topic
 * unknown to the broker), SVC_EINVAL (bad message), SVC_EINTERNAL, with the
 * reason in errbuf. Thread-safe. The first message to a topic waits (up to
 * 0.5 s) for that topic's metadata, so that it is sent at once, not after
 * librdkafka's next topic scan; later ones never block.
 */
svc_err_t kfk_produce(kfk_producer_t *p, const kfk_message_t *m,
                      char errbuf[static SVC_ERRBUF_LEN]);

/* Serves delivery reports (and librdkafka's log lines), waiting up to
 * timeout_ms for the first. Returns how many events were served. Call it
 * from one thread. */
int kfk_producer_poll(kfk_producer_t *p, int timeout_ms);

/* Sends what is queued now, without waiting for linger_ms, and serves
 * delivery reports (and log lines) until none is outstanding or timeout_ms
 * passed, like kfk_producer_poll. For a caller that has produced all it
 * has for now and waits for the outcome. Returns the messages still
 * outstanding. Call it from the polling thread. */
int kfk_producer_flush(kfk_producer_t *p, int timeout_ms);

/* From inside on_delivery only: the kfk_producer_poll or kfk_producer_flush
 * serving that report returns as soon as the callback does; reports not yet
 * served stay queued for the next call. For a caller waiting for some of
 * its messages while others are outstanding: a flush would otherwise serve
 * reports until its timeout (the relay waits for one batch while the next
 * is in flight). */
void kfk_producer_yield(kfk_producer_t *p);

/* Asks a broker for metadata and waits up to timeout_ms for the answer:
 * SVC_OK when one answered, SVC_EUNAVAIL (no broker reachable, or no answer
 * in time: down or hung) with librdkafka's reason in errbuf. Blocks the
 * calling thread up to timeout_ms, a few ms while a broker is up; serves no
 * callbacks (no delivery report fires). For a caller with nothing to send
 * that wants to know whether it could. Thread-safe. */
svc_err_t kfk_producer_ping(kfk_producer_t *p, int timeout_ms, char errbuf[static SVC_ERRBUF_LEN]);

/* Messages queued or in flight (not yet reported). Thread-safe. */
int kfk_producer_outstanding(const kfk_producer_t *p);

/* The svc_err_t for a librdkafka error code (rd_kafka_resp_err_t, as int so
 * that this header does not need librdkafka's). Exposed for tests. */
svc_err_t kfk_err_from_rd(int rd_err);

#endif /* KFK_KAFKA_H */
