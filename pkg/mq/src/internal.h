/* SPDX-License-Identifier: Apache-2.0 */
/*
 * internal.h - what the files of pkg/mq share (rmq__ names); not installed.
 * The unit tests include it for the pure helpers (x-death, field text).
 */
#ifndef RMQ_INTERNAL_H
#define RMQ_INTERNAL_H

#include <amqp.h>
#include <sys/time.h>

#include "mq/mq.h"

#define RMQ__LOG_MODULE "mq"
#define RMQ__CHANNEL    1

struct rmq_conn {
    amqp_connection_state_t st;
    uint64_t next_seq; /* delivery tag the broker gives the next publish */
    int io_timeout_ms;
    bool confirm; /* channel in confirm mode (publishing)           */
    /* A consumer's channel: when the broker closes it, the basic.consume
     * is gone with it, so the connection is failed rather than reopened
     * (a reopened channel would wait for deliveries that never come). */
    bool consuming;
    bool dead;
    char why[SVC_ERRBUF_LEN]; /* the first failure, repeated by later calls    */
    char name[64];
};

/* conn.c */
svc_err_t rmq__conn_open(const rmq_conn_opts_t *o, bool confirm, rmq_conn_t **out,
                         char errbuf[static SVC_ERRBUF_LEN]);
/* SVC_EUNAVAIL with the first failure when c is dead. */
svc_err_t rmq__conn_check(rmq_conn_t *c, char errbuf[static SVC_ERRBUF_LEN]);
/* Marks c dead (once: logs one warn line) and returns SVC_EUNAVAIL with the
 * reason in errbuf. */
svc_err_t rmq__conn_fail(rmq_conn_t *c, svc_err_t err, char errbuf[static SVC_ERRBUF_LEN],
                         const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* The outcome of an RPC (what names it for errbuf). A channel error
 * (the broker closed the channel) reopens the channel and keeps c alive. */
svc_err_t rmq__reply(rmq_conn_t *c, amqp_rpc_reply_t r, const char *what,
                     char errbuf[static SVC_ERRBUF_LEN]);
/* The outcome of a rabbitmq-c status code (AMQP_STATUS_*). */
svc_err_t rmq__status(rmq_conn_t *c, int status, const char *what,
                      char errbuf[static SVC_ERRBUF_LEN]);
/* Handles a method frame that arrived while waiting for something else:
 * channel.close (answered, channel reopened: SVC_EUNAVAIL for the wait in
 * progress, c alive), connection.close (c dead). Other methods: SVC_OK. */
svc_err_t rmq__unexpected_method(rmq_conn_t *c, const amqp_frame_t *f,
                                 char errbuf[static SVC_ERRBUF_LEN]);
struct timeval rmq__tv(int ms);
/* Milliseconds left until deadline_ms (svc_now_ms); 0 once past. */
int rmq__ms_left(uint64_t deadline_ms);

/* publish.c: publishes with mandatory and waits for the confirm. */
svc_err_t rmq__publish_props(rmq_conn_t *c, const char *exchange, const char *routing_key,
                             const amqp_basic_properties_t *props, amqp_bytes_t body,
                             char errbuf[static SVC_ERRBUF_LEN]);

/* fields.c: pure */
/* v as text (see rmq_delivery_header); false for arrays, tables, bytes. */
bool rmq__field_text(const amqp_field_value_t *v, char *out, size_t cap);
/* An integer field of any width; false when v is not one. */
bool rmq__field_int(const amqp_field_value_t *v, int64_t *out);
/* The entry named name in t, or NULL. */
const amqp_field_value_t *rmq__table_get(const amqp_table_t *t, const char *name);
/* The sum of the counts of x-death's "expired" entries whose queue starts
 * with tier_prefix ("B.retry."); 0 when headers has no usable x-death. */
unsigned rmq__xdeath_tier_count(const amqp_table_t *headers, const char *tier_prefix);
/* True when b holds exactly the NUL-terminated s. */
bool rmq__bytes_eq(amqp_bytes_t b, const char *s);
/* v as text for people, whatever its kind: strings as they are, integers,
 * booleans, floats, timestamps as RFC 3339 (UTC, seconds), arrays as
 * [a, b], tables as {k=v, ...}. Always NUL-terminated; a longer text is cut
 * and ends in "...". */
void rmq__field_render(const amqp_field_value_t *v, char *out, size_t cap);
/* The header list of a copy: the entries of h (NULL: none) except those
 * named in drop (a name ending in '*' is a prefix) and those set replaces,
 * then set. A calloc'ed array of *n_out entries, owned by caller (free());
 * the keys and values still point into h and set. NULL: out of memory. */
amqp_table_entry_t *rmq__headers_edit(const amqp_table_t *h, const char *const *drop, size_t n_drop,
                                      const amqp_table_entry_t *set, int n_set, int *n_out);

#endif /* RMQ_INTERNAL_H */
