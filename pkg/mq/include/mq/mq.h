/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mq/mq.h - RabbitMQ through rabbitmq-c 0.11, the way ShopMicro's
 * notification jobs need it: durable work, delayed retries, dead letters.
 *
 *   rmq_conn_t       one AMQP connection with one channel in confirm mode:
 *                    declares a topology and publishes with publisher
 *                    confirms and the mandatory flag (a publish returns
 *                    SVC_OK only after the broker's basic.ack, and never for a
 *                    message the broker returned as unroutable).
 *   rmq_topology_t   the queues of one base name B, declared idempotently:
 *                      exchange B (direct, durable)  --"work"-->  queue B.work
 *                      queue B.retry.<k> (k = 1..n, x-message-ttl = delay k)
 *                        dead-letters back to exchange B, key "work"
 *                      queue B.dead: the final dead-letter queue (B.work's own
 *                        dead-letter target too, for a rejected message)
 *                    All classic durable queues: see docs/notifications.md.
 *   rmq_consumer_t   a consumer of B.work: prefetch N, manual ack; moves a
 *                    delivery to a retry tier or to B.dead by publishing a
 *                    copy with a confirm on a connection of its own and only
 *                    then acking the original.
 *
 * Prefix rmq_ (never mq_, which POSIX <mqueue.h> reserves; never amqp_,
 * rabbitmq-c's). Every call is bounded by the connection's io_timeout_ms or
 * an explicit timeout; a connection that failed is reported (SVC_EUNAVAIL)
 * and stays failed: free it and make a new one. No handle is thread-safe:
 * use each from one thread (one connection and one consumer per worker).
 * The library logs key=value lines (module "mq") only on connect, on
 * topology declaration and when a connection is lost; detail is returned
 * in errbuf (SVC_ERRBUF_LEN bytes, optional everywhere).
 */
#ifndef RMQ_MQ_H
#define RMQ_MQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "svc/core.h"

/* On every call whose error must not be dropped: an ignored publish or ack
 * result is how a job gets lost or stuck. */
#define RMQ_MUST_USE __attribute__((warn_unused_result))

/* ------------------------------------------------------------------------
 * Connection
 * ------------------------------------------------------------------------ */
#define RMQ_DEFAULT_HOST     "127.0.0.1"
#define RMQ_DEFAULT_PORT     5672
#define RMQ_DEFAULT_VHOST    "/"
#define RMQ_DEFAULT_USER     "guest"
#define RMQ_DEFAULT_PASSWORD "guest"
/* The broker closes a connection that sent nothing for two intervals; the
 * client must call into this library at least once per interval (a
 * consumer waiting in rmq_consumer_next does). 30 s leaves a webhook call
 * of up to ~60 s between two calls. 0 disables heartbeats. */
#define RMQ_DEFAULT_HEARTBEAT_S        30
#define RMQ_DEFAULT_CONNECT_TIMEOUT_MS 5000 /* TCP connect, then the login handshake */
/* Every broker round trip: a declare, a publish's confirm, an ack's write. */
#define RMQ_DEFAULT_IO_TIMEOUT_MS 5000
#define RMQ_DEFAULT_CONN_NAME     "shopmicro"

typedef struct rmq_conn_opts {
    const char *host;       /* RMQ_DEFAULT_HOST (numeric or a name)          */
    int port;               /* 1..65535; RMQ_DEFAULT_PORT                    */
    const char *vhost;      /* RMQ_DEFAULT_VHOST                             */
    const char *user;       /* RMQ_DEFAULT_USER                              */
    const char *password;   /* RMQ_DEFAULT_PASSWORD                          */
    int heartbeat_s;        /* 0..600; RMQ_DEFAULT_HEARTBEAT_S               */
    int connect_timeout_ms; /* 100..120000; RMQ_DEFAULT_CONNECT_TIMEOUT_MS   */
    int io_timeout_ms;      /* 100..120000; RMQ_DEFAULT_IO_TIMEOUT_MS        */
    const char *name;       /* connection_name shown by rabbitmqctl
                               list_connections; RMQ_DEFAULT_CONN_NAME       */
} rmq_conn_opts_t;

/* Fills o with the defaults above. */
void rmq_conn_opts_init(rmq_conn_opts_t *o);
/* SVC_EINVAL naming the first bad option in errbuf. Pure. */
svc_err_t rmq_conn_opts_validate(const rmq_conn_opts_t *o, char errbuf[static SVC_ERRBUF_LEN]);

typedef struct rmq_conn rmq_conn_t; /* opaque */

/*
 * Connects, logs in, opens channel 1 and puts it in confirm mode, all
 * within connect_timeout_ms (+ io_timeout_ms for the channel). On SVC_OK
 * *out is owned by caller (rmq_conn_free). Errors: SVC_EINVAL (options),
 * SVC_EUNAVAIL (no broker, connection refused or cut), SVC_ETIMEDOUT,
 * SVC_EUNAUTH (login refused), SVC_EPERM (vhost not allowed).
 */
RMQ_MUST_USE
svc_err_t rmq_conn_new(const rmq_conn_opts_t *o, rmq_conn_t **out,
                       char errbuf[static SVC_ERRBUF_LEN]);
/* Closes the channel and the connection (bounded by io_timeout_ms) and
 * frees c. NULL-safe. */
void rmq_conn_free(rmq_conn_t *c);
/* False once the connection failed (the broker closed it, a socket error,
 * a timeout that left it unusable, a missed heartbeat): every later call
 * returns SVC_EUNAVAIL at once with the first failure's reason. */
bool rmq_conn_alive(const rmq_conn_t *c);

/*
 * Serves the connection without blocking: sends a heartbeat when one is
 * due and notices a broker that closed it. rabbitmq-c sends heartbeats only
 * from inside its calls, so a connection of rmq_conn_new that sits idle
 * between jobs (a publisher waiting for the next event) must be given this
 * at least every heartbeat_s / 2, or the broker closes it after two silent
 * intervals. SVC_OK, or SVC_EUNAVAIL when it failed. Only for connections of
 * rmq_conn_new (a consumer serves its own).
 */
RMQ_MUST_USE
svc_err_t rmq_conn_keepalive(rmq_conn_t *c, char errbuf[static SVC_ERRBUF_LEN]);

/* ------------------------------------------------------------------------
 * Topology
 * ------------------------------------------------------------------------ */
#define RMQ_MAX_TIERS 8
#define RMQ_NAME_MAX  200    /* a queue or exchange name, NUL included */
#define RMQ_WORK_KEY  "work" /* routing key from the exchange to B.work */

typedef struct rmq_topology {
    const char *base;              /* B: 1..150 chars [A-Za-z0-9._-]       */
    const uint32_t *tier_delay_ms; /* n_tiers delays, each 1..86400000,
                                      e.g. {1000, 10000, 60000}; borrowed   */
    size_t n_tiers;                /* 0..RMQ_MAX_TIERS                      */
} rmq_topology_t;

/* SVC_EINVAL naming what is wrong. Pure. */
svc_err_t rmq_topology_validate(const rmq_topology_t *t, char errbuf[static SVC_ERRBUF_LEN]);

typedef enum {
    RMQ_NAME_EXCHANGE, /* B          */
    RMQ_NAME_WORK,     /* B.work     */
    RMQ_NAME_TIER,     /* B.retry.k  (k = 1..n_tiers) */
    RMQ_NAME_DEAD,     /* B.dead     */
} rmq_name_kind_t;

/* Writes the name of one object of t into out (RMQ_NAME_MAX bytes); tier
 * is used for RMQ_NAME_TIER only. Pure. */
void rmq_topology_name(const rmq_topology_t *t, rmq_name_kind_t kind, unsigned tier,
                       char out[RMQ_NAME_MAX]);

/*
 * Declares the exchange, the work queue and its binding, every tier queue
 * and the dead-letter queue, all durable. Declaring what exists with the
 * same arguments changes nothing (safe at every start). An object that
 * exists with other arguments gives SVC_EPRECOND, errbuf naming it and the
 * broker's reason (PRECONDITION_FAILED); the channel the broker closed for
 * it is reopened, so c stays usable. Other errors as rmq_conn_new.
 */
RMQ_MUST_USE
svc_err_t rmq_topology_declare(rmq_conn_t *c, const rmq_topology_t *t,
                               char errbuf[static SVC_ERRBUF_LEN]);

/* ------------------------------------------------------------------------
 * Publishing
 * ------------------------------------------------------------------------ */
#define RMQ_MAX_HEADERS      32
#define RMQ_HEADER_VALUE_MAX 256 /* a header's value as text, NUL included */

/* One header with a text value (sent as an AMQP long string). */
typedef struct rmq_header {
    const char *name;  /* non-empty */
    const char *value; /* NUL-terminated */
} rmq_header_t;

typedef struct rmq_message {
    const void *body; /* body_len bytes; may be NULL when 0       */
    size_t body_len;
    const char *message_id;      /* required, non-empty: the job's identity   */
    const char *content_type;    /* NULL: "application/octet-stream"          */
    const rmq_header_t *headers; /* n_headers (<= RMQ_MAX_HEADERS), borrowed  */
    size_t n_headers;
} rmq_message_t;

/*
 * Publishes m persistent (delivery mode 2) with the mandatory flag to the
 * exchange of t, routing key RMQ_WORK_KEY, and waits up to io_timeout_ms
 * for the outcome. SVC_OK only after the broker's basic.ack, and the
 * message was routed to a queue. Otherwise: SVC_ENOTFOUND (returned as
 * unroutable: no queue bound), SVC_EUNAVAIL (basic.nack: the broker could
 * not take it; or the connection failed), SVC_ETIMEDOUT (no confirm in
 * time: the message may or may not be queued; publish it again, consumers
 * dedupe on message_id), SVC_EINVAL (bad message). Bytes are sent before it
 * returns; nothing is borrowed after.
 */
RMQ_MUST_USE
svc_err_t rmq_publish(rmq_conn_t *c, const rmq_topology_t *t, const rmq_message_t *m,
                      char errbuf[static SVC_ERRBUF_LEN]);
/* The same to any exchange ("" is the default exchange, whose routing key
 * is a queue name). */
RMQ_MUST_USE
svc_err_t rmq_publish_to(rmq_conn_t *c, const char *exchange, const char *routing_key,
                         const rmq_message_t *m, char errbuf[static SVC_ERRBUF_LEN]);

/* ------------------------------------------------------------------------
 * Consuming
 * ------------------------------------------------------------------------ */
#define RMQ_DEFAULT_PREFETCH 16

/* Headers this module sets when it moves a message. */
#define RMQ_HDR_RETRIES      "x-shopmicro-retries" /* tier moves so far   */
#define RMQ_HDR_FINAL_REASON "x-shopmicro-final-reason"
#define RMQ_HDR_HTTP_STATUS  "x-shopmicro-last-http-status"
#define RMQ_HDR_ATTEMPTS     "x-shopmicro-attempts"
#define RMQ_HDR_DEAD_AT      "x-shopmicro-dead-at" /* RFC 3339, UTC      */

typedef struct rmq_consumer_opts {
    rmq_conn_opts_t conn;           /* for both of its connections          */
    const rmq_topology_t *topology; /* required; borrowed for the consumer's
                                       lifetime                             */
    int prefetch;                   /* 1..10000; RMQ_DEFAULT_PREFETCH: the
                                       unacked deliveries the broker sends
                                       ahead (basic.qos)                    */
} rmq_consumer_opts_t;

/* Fills o: rmq_conn_opts_init of o->conn, prefetch, no topology. */
void rmq_consumer_opts_init(rmq_consumer_opts_t *o);

typedef struct rmq_consumer rmq_consumer_t; /* opaque */
typedef struct rmq_delivery rmq_delivery_t; /* opaque */

/* Opens the consuming connection (basic.qos, basic.consume on B.work with
 * manual ack) and the connection its moves publish on. The topology must be
 * declared already (SVC_ENOTFOUND otherwise). On SVC_OK *out is owned by
 * caller (rmq_consumer_free). */
RMQ_MUST_USE
svc_err_t rmq_consumer_new(const rmq_consumer_opts_t *o, rmq_consumer_t **out,
                           char errbuf[static SVC_ERRBUF_LEN]);
/* Closes both connections; deliveries not acked go back to B.work (marked
 * redelivered). Deliveries still held must be freed before. NULL-safe. */
void rmq_consumer_free(rmq_consumer_t *c);
bool rmq_consumer_alive(const rmq_consumer_t *c);

/* Waits up to timeout_ms for the next delivery. SVC_OK: *out is owned by
 * caller (rmq_delivery_free, after settling it or not); SVC_ETIMEDOUT:
 * none came; SVC_EUNAVAIL: the connection failed (or the broker cancelled
 * the consumer, e.g. the queue was deleted). */
RMQ_MUST_USE
svc_err_t rmq_consumer_next(rmq_consumer_t *c, int timeout_ms, rmq_delivery_t **out,
                            char errbuf[static SVC_ERRBUF_LEN]);

/* Acks d: the job is done and leaves the queue. */
RMQ_MUST_USE
svc_err_t rmq_consumer_ack(rmq_consumer_t *c, rmq_delivery_t *d,
                           char errbuf[static SVC_ERRBUF_LEN]);

/* Moves d to retry tier `tier` (1..n_tiers): publishes a copy (body,
 * message-id, content type, headers, RMQ_HDR_RETRIES + 1, RMQ_HDR_ATTEMPTS =
 * attempts: the delivery attempts made so far, all passes, so the count
 * survives the tiers) to B.retry.<tier> and waits for its confirm; only then
 * acks d. On any error d is NOT acked (it stays unacked, and comes back when
 * the consumer goes away): the job is never in neither place. */
RMQ_MUST_USE
svc_err_t rmq_consumer_retry(rmq_consumer_t *c, rmq_delivery_t *d, unsigned tier, int attempts,
                             char errbuf[static SVC_ERRBUF_LEN]);

/* Why a job was given up, for the dead-letter queue's headers. */
typedef struct rmq_dead_info {
    const char *final_reason; /* e.g. "attempts_exhausted"; required   */
    int last_http_status;     /* 0: none (e.g. the connection failed)   */
    int attempts;             /* delivery attempts made, all tiers      */
} rmq_dead_info_t;

/* Moves d to B.dead with RMQ_HDR_FINAL_REASON, RMQ_HDR_HTTP_STATUS,
 * RMQ_HDR_ATTEMPTS and RMQ_HDR_DEAD_AT (the wall-clock time of the move)
 * added, confirm first and ack after, as rmq_consumer_retry. */
RMQ_MUST_USE
svc_err_t rmq_consumer_dead(rmq_consumer_t *c, rmq_delivery_t *d, const rmq_dead_info_t *why,
                            char errbuf[static SVC_ERRBUF_LEN]);

/* Frees d (NULL-safe). A delivery freed without ack stays unacked on the
 * broker until the consumer closes. */
void rmq_delivery_free(rmq_delivery_t *d);

/* What a delivery carries; every pointer is valid until rmq_delivery_free. */
const void *rmq_delivery_body(const rmq_delivery_t *d, size_t *len);
const char *rmq_delivery_message_id(const rmq_delivery_t *d);   /* "" when absent */
const char *rmq_delivery_content_type(const rmq_delivery_t *d); /* "" when absent */
/* A header's value as text (strings as they are, integers in decimal,
 * booleans as true/false); NULL when absent or of another type (arrays,
 * tables: x-death is read by rmq_delivery_tier_passes). */
const char *rmq_delivery_header(const rmq_delivery_t *d, const char *name);
/* True when the broker delivered it before (to a consumer that went away
 * without settling it). */
bool rmq_delivery_redelivered(const rmq_delivery_t *d);
/* How often it expired out of one of this topology's tier queues, by the
 * broker's x-death header (the sum of the counts of its "expired" entries
 * whose queue is a B.retry.<k>). */
unsigned rmq_delivery_xdeath_tiers(const rmq_delivery_t *d);
/* The retry passes so far: the larger of RMQ_HDR_RETRIES and
 * rmq_delivery_xdeath_tiers. Our own counter goes with x-death because
 * RabbitMQ 3.13.0-3.13.2 and 4.x do not count an x-death that a client
 * republished (rabbitmq-server #10709, #11331). */
unsigned rmq_delivery_tier_passes(const rmq_delivery_t *d);

/*
 * The tier a job goes to after `passes` retry passes: 1..n_tiers, or 0
 * when it has been through every tier and goes to the dead-letter queue.
 * Pure.
 */
unsigned rmq_tier_next(unsigned passes, size_t n_tiers);

/* ------------------------------------------------------------------------
 * Queue operations: what an operator's tool does to one queue (notify-dlq,
 * the dead-letter CLI): its depth, a purge, and a browse that takes its
 * messages one at a time, holds them unacked, and then puts each back in
 * its place, acks it, or moves it on (a copy with edited headers, confirmed
 * before the original is acked).
 * ------------------------------------------------------------------------ */

/* Messages ready in queue (a passive queue.declare) and, optionally, its
 * consumers. SVC_ENOTFOUND when there is no such queue (the broker closes
 * the channel for that; it is reopened and c stays usable). */
RMQ_MUST_USE
svc_err_t rmq_queue_depth(rmq_conn_t *c, const char *queue, uint32_t *ready, uint32_t *consumers,
                          char errbuf[static SVC_ERRBUF_LEN]);
/* Removes every ready message of queue (queue.purge; messages a consumer
 * holds unacked are not touched) and gives their count in *purged
 * (optional). SVC_ENOTFOUND as rmq_queue_depth. Gone for good. */
RMQ_MUST_USE
svc_err_t rmq_queue_purge(rmq_conn_t *c, const char *queue, uint32_t *purged,
                          char errbuf[static SVC_ERRBUF_LEN]);

/* The most messages one browse holds unacked at a time. */
#define RMQ_BROWSE_MAX_HELD 10000

typedef struct rmq_browse rmq_browse_t;   /* opaque */
typedef struct rmq_fetched rmq_fetched_t; /* opaque: one message a browse holds */

/*
 * Opens a connection of its own (confirm mode, for moves) to take messages
 * from queue. The queue must exist: SVC_ENOTFOUND otherwise (nothing is
 * held then). *ready (optional) gets its depth at the start. On SVC_OK *out
 * is owned by caller (rmq_browse_free). Other errors as rmq_conn_new.
 */
RMQ_MUST_USE
svc_err_t rmq_browse_new(const rmq_conn_opts_t *o, const char *queue, rmq_browse_t **out,
                         uint32_t *ready, char errbuf[static SVC_ERRBUF_LEN]);
/* Puts back whatever b still holds (as rmq_browse_release), closes the
 * connection and frees b. Fetched messages must be freed before or after;
 * they cannot be settled any more. NULL-safe. Should the process die
 * instead, the broker requeues what it held when the connection drops. */
void rmq_browse_free(rmq_browse_t *b);

/*
 * Takes the next ready message of the queue (basic.get, manual ack) and
 * holds it: no other consumer gets it until it is settled or released.
 * SVC_OK with *out owned by caller (rmq_fetched_free, which does not settle
 * it), or SVC_OK with *out NULL when the queue has no more ready messages;
 * SVC_EEXHAUSTED when b already holds RMQ_BROWSE_MAX_HELD. Bounded by
 * io_timeout_ms (the get) and the heartbeat (its content frames, read by
 * rabbitmq-c as rmq_consumer_next's). A channel or connection error fails
 * b (SVC_EUNAVAIL): the broker then requeues all it held.
 */
RMQ_MUST_USE
svc_err_t rmq_browse_next(rmq_browse_t *b, rmq_fetched_t **out, char errbuf[static SVC_ERRBUF_LEN]);

/*
 * Gives every held message back to the queue (one basic.nack, multiple,
 * requeue). A classic queue puts a requeued message back where it was, so
 * a browse that takes N messages and releases them leaves the queue as it
 * was (order and all; they are marked redelivered). Messages fetched before
 * cannot be settled after this. SVC_OK also when nothing was held.
 */
RMQ_MUST_USE
svc_err_t rmq_browse_release(rmq_browse_t *b, char errbuf[static SVC_ERRBUF_LEN]);

/* Acks f: it leaves the queue for good. */
RMQ_MUST_USE
svc_err_t rmq_browse_ack(rmq_browse_t *b, rmq_fetched_t *f, char errbuf[static SVC_ERRBUF_LEN]);

/* How a moved copy's headers differ from the original's. */
typedef struct rmq_header_edit {
    const char *const *drop; /* names removed; one ending in '*' removes
                                every header starting with what is before
                                it ("x-first-death-*")                   */
    size_t n_drop;
    const rmq_header_t *set; /* text headers added, replacing any of the
                                same name                                */
    size_t n_set;
} rmq_header_edit_t;

/* The edit that makes a dead job new again for its retry tiers:
 * RMQ_HDR_RETRIES set to "0"; RMQ_HDR_FINAL_REASON, RMQ_HDR_HTTP_STATUS,
 * RMQ_HDR_ATTEMPTS, RMQ_HDR_DEAD_AT and the broker's x-death,
 * x-first-death-* and x-last-death-* dropped (rmq_delivery_tier_passes
 * counts x-death too: a job replayed with it would skip its tiers). Static;
 * never NULL. */
const rmq_header_edit_t *rmq_header_edit_replay(void);

/*
 * Moves f: publishes a copy (body, message-id, content type and the other
 * properties, headers edited by edit (NULL: unchanged), persistent,
 * mandatory) to exchange with routing_key and waits for its confirm; only
 * then acks f. On any error f is not acked: it stays held and goes back to
 * its place on release (so a job is never in neither place; a crash after
 * the confirm and before the ack leaves it in both, and receivers dedupe
 * on message-id). Errors as rmq_publish (SVC_ENOTFOUND: unroutable).
 */
RMQ_MUST_USE
svc_err_t rmq_browse_move(rmq_browse_t *b, rmq_fetched_t *f, const char *exchange,
                          const char *routing_key, const rmq_header_edit_t *edit,
                          char errbuf[static SVC_ERRBUF_LEN]);

/* Frees f (NULL-safe); a held message stays held until settled or
 * released. */
void rmq_fetched_free(rmq_fetched_t *f);

/* What a fetched message carries; every pointer is valid until
 * rmq_fetched_free. */
const void *rmq_fetched_body(const rmq_fetched_t *f, size_t *len);
const char *rmq_fetched_message_id(const rmq_fetched_t *f);   /* "" when absent */
const char *rmq_fetched_content_type(const rmq_fetched_t *f); /* "" when absent */
/* Its headers, in the order they came, rendered as text for people (see
 * RMQ_FETCHED_VALUE_MAX): strings, numbers, booleans, timestamps as RFC
 * 3339, arrays and tables (x-death) as [..] and {k=v, ...}. */
#define RMQ_FETCHED_VALUE_MAX 1024 /* a rendered value, NUL included; cut */
size_t rmq_fetched_header_count(const rmq_fetched_t *f);
/* Header i (< count): its name in *name, its rendered value returned. */
const char *rmq_fetched_header_at(const rmq_fetched_t *f, size_t i, const char **name);
/* The rendered value of the header named name; NULL when absent. */
const char *rmq_fetched_header(const rmq_fetched_t *f, const char *name);
/* When it died: RMQ_HDR_DEAD_AT if it has one, else the time of the
 * broker's newest x-death entry (a rejected or expired message that the
 * broker dead-lettered), as RFC 3339; "" when neither is there. */
const char *rmq_fetched_dead_at(const rmq_fetched_t *f);

#endif /* RMQ_MQ_H */
