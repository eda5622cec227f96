/* SPDX-License-Identifier: Apache-2.0 */
/*
 * consume.c - the consumer of B.work: prefetch, manual acks, and the moves
 * to a retry tier or to the dead-letter queue, each confirmed before the
 * original is acked.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define HDR_NAME_MAX 128
#define ID_MAX       256
/* rmq_consumer_next waits in slices of this, serving the moves'
 * connection between them. */
#define SLICE_MS 1000

struct rmq_consumer {
    rmq_conn_t *in; /* consumes; no confirm mode (nothing is published here) */
    /* Moves publish on a connection of their own: a confirm awaited on the
     * consuming channel would be interleaved with the deliveries that
     * prefetch keeps arriving there. */
    rmq_conn_t *out;
    const rmq_topology_t *t;
    char tier_prefix[RMQ_NAME_MAX]; /* "B.retry." */
    char dead[RMQ_NAME_MAX];
};

typedef struct header_text {
    char name[HDR_NAME_MAX];
    char value[RMQ_HEADER_VALUE_MAX];
} header_text_t;

struct rmq_delivery {
    amqp_envelope_t env; /* owns the body and the properties */
    const rmq_consumer_t *owner;
    unsigned xdeath, retries;
    char message_id[ID_MAX], content_type[ID_MAX];
    size_t n_headers;
    header_text_t h[RMQ_MAX_HEADERS];
};

void rmq_consumer_opts_init(rmq_consumer_opts_t *o)
{
    memset(o, 0, sizeof *o);
    rmq_conn_opts_init(&o->conn);
    o->prefetch = RMQ_DEFAULT_PREFETCH;
}

static svc_err_t start_consuming(rmq_conn_t *in, const rmq_topology_t *t, int prefetch,
                                 char errbuf[static SVC_ERRBUF_LEN])
{
    char work[RMQ_NAME_MAX];
    svc_err_t err;

    rmq_topology_name(t, RMQ_NAME_WORK, 0, work);
    /* The broker sends at most `prefetch` unacked deliveries: the rest stay
     * in the queue for other workers, and a crash redelivers at most that. */
    amqp_basic_qos(in->st, RMQ__CHANNEL, 0, (uint16_t)prefetch, 0);
    err = rmq__reply(in, amqp_get_rpc_reply(in->st), "basic.qos", errbuf);
    if (err != SVC_OK)
        return err;
    amqp_basic_consume(in->st, RMQ__CHANNEL, amqp_cstring_bytes(work), amqp_empty_bytes, 0, 0, 0,
                       amqp_empty_table);
    return rmq__reply(in, amqp_get_rpc_reply(in->st), "basic.consume", errbuf);
}

svc_err_t rmq_consumer_new(const rmq_consumer_opts_t *o, rmq_consumer_t **out,
                           char errbuf[static SVC_ERRBUF_LEN])
{
    rmq_consumer_t *c = NULL;
    rmq_conn_opts_t mover = o->conn;
    char name[64];
    svc_err_t err;

    if (o->topology == NULL || o->prefetch < 1 || o->prefetch > 10000) {
        svc_errbuf_set(errbuf, "rabbitmq consumer: topology is required, prefetch 1..10000");
        return SVC_EINVAL;
    }
    err = rmq_topology_validate(o->topology, errbuf);
    if (err != SVC_OK)
        return err;
    if ((c = calloc(1, sizeof *c)) == NULL) {
        svc_errbuf_set(errbuf, "rabbitmq consumer: out of memory");
        return SVC_ENOMEM;
    }
    c->t = o->topology;
    rmq_topology_name(c->t, RMQ_NAME_TIER, 0, c->tier_prefix);
    c->tier_prefix[strlen(c->tier_prefix) - 1] = '\0'; /* "B.retry.0" -> "B.retry." */
    rmq_topology_name(c->t, RMQ_NAME_DEAD, 0, c->dead);
    snprintf(name, sizeof name, "%.56s-mover", o->conn.name ? o->conn.name : "");
    mover.name = name;
    err = rmq__conn_open(&o->conn, false, &c->in, errbuf);
    if (err == SVC_OK) {
        c->in->consuming = true;
        err = start_consuming(c->in, c->t, o->prefetch, errbuf);
    }
    if (err == SVC_OK)
        err = rmq__conn_open(&mover, true, &c->out, errbuf);
    if (err != SVC_OK) {
        rmq_consumer_free(c);
        return err;
    }
    *out = c;
    return SVC_OK;
}

void rmq_consumer_free(rmq_consumer_t *c)
{
    if (c == NULL)
        return;
    rmq_conn_free(c->in);
    rmq_conn_free(c->out);
    free(c);
}

bool rmq_consumer_alive(const rmq_consumer_t *c)
{
    return rmq_conn_alive(c->in) && rmq_conn_alive(c->out);
}

static void copy_bytes(char *out, size_t cap, amqp_bytes_t b)
{
    size_t n = b.len < cap - 1 ? b.len : cap - 1;

    if (n > 0)
        memcpy(out, b.bytes, n);
    out[n] = '\0';
}

static unsigned retries_of(const amqp_table_t *h)
{
    const amqp_field_value_t *v = rmq__table_get(h, RMQ_HDR_RETRIES);
    int64_t n = 0;

    if (v != NULL && !rmq__field_int(v, &n) && v->kind == AMQP_FIELD_KIND_UTF8) {
        char text[32];
        copy_bytes(text, sizeof text, v->value.bytes);
        n = strtoll(text, NULL, 10);
    }
    return n > 0 && n < 1000000 ? (unsigned)n : 0;
}

/* The text of every header that has one, up to RMQ_MAX_HEADERS; a longer
 * name or value is cut, since these are for reading, not for routing. */
static void fill(rmq_delivery_t *d, const rmq_consumer_t *c)
{
    const amqp_basic_properties_t *p = &d->env.message.properties;
    const amqp_table_t *h = (p->_flags & AMQP_BASIC_HEADERS_FLAG) ? &p->headers : NULL;

    if (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG)
        copy_bytes(d->message_id, sizeof d->message_id, p->message_id);
    if (p->_flags & AMQP_BASIC_CONTENT_TYPE_FLAG)
        copy_bytes(d->content_type, sizeof d->content_type, p->content_type);
    for (int i = 0; h != NULL && i < h->num_entries && d->n_headers < RMQ_MAX_HEADERS; i++) {
        header_text_t *t = &d->h[d->n_headers];
        if (!rmq__field_text(&h->entries[i].value, t->value, sizeof t->value))
            continue;
        copy_bytes(t->name, sizeof t->name, h->entries[i].key);
        d->n_headers++;
    }
    d->xdeath = rmq__xdeath_tier_count(h, c->tier_prefix);
    d->retries = retries_of(h);
    d->owner = c;
}

/* A frame that is not a delivery arrived on the consuming connection. */
static svc_err_t other_frame(rmq_consumer_t *c, char errbuf[static SVC_ERRBUF_LEN])
{
    struct timeval tv = rmq__tv(c->in->io_timeout_ms);
    amqp_frame_t f;
    int st = amqp_simple_wait_frame_noblock(c->in->st, &f, &tv);

    if (st != AMQP_STATUS_OK)
        return rmq__status(c->in, st, "reading a frame", errbuf);
    if (f.frame_type != AMQP_FRAME_METHOD)
        return SVC_OK;
    /* The broker cancels a consumer whose queue was deleted: no delivery
     * will come again, which the caller must hear about. */
    if (f.payload.method.id == AMQP_BASIC_CANCEL_METHOD)
        return rmq__conn_fail(c->in, SVC_EUNAVAIL, errbuf, "the broker cancelled the consumer");
    return rmq__unexpected_method(c->in, &f, errbuf);
}

svc_err_t rmq_consumer_next(rmq_consumer_t *c, int timeout_ms, rmq_delivery_t **out,
                            char errbuf[static SVC_ERRBUF_LEN])
{
    uint64_t deadline = svc_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    rmq_delivery_t *d = calloc(1, sizeof *d);
    svc_err_t err = rmq__conn_check(c->in, errbuf);

    if (d == NULL && err == SVC_OK) {
        svc_errbuf_set(errbuf, "rabbitmq consumer: out of memory");
        err = SVC_ENOMEM;
    }
    while (err == SVC_OK) {
        int left = rmq__ms_left(deadline);
        struct timeval tv = rmq__tv(left < SLICE_MS ? left : SLICE_MS);
        amqp_rpc_reply_t r;

        /* The moves' connection is idle while jobs come and go: without a
         * heartbeat from it in every slice the broker would close it, and the
         * next move would fail. */
        err = rmq_conn_keepalive(c->out, errbuf);
        if (err != SVC_OK)
            break;
        amqp_maybe_release_buffers(c->in->st);
        r = amqp_consume_message(c->in->st, &d->env, &tv, 0);
        if (r.reply_type == AMQP_RESPONSE_NORMAL) {
            fill(d, c);
            *out = d;
            return SVC_OK;
        }
        if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
            r.library_error == AMQP_STATUS_UNEXPECTED_STATE)
            err = other_frame(c, errbuf);
        else if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
                 r.library_error == AMQP_STATUS_TIMEOUT)
            err = SVC_OK; /* this slice is over; the deadline decides below */
        else
            err = rmq__reply(c->in, r, "basic.consume", errbuf);
        if (err == SVC_OK && rmq__ms_left(deadline) == 0)
            err = SVC_ETIMEDOUT;
    }
    if (err == SVC_ETIMEDOUT)
        svc_errbuf_set(errbuf, "no delivery within %d ms", timeout_ms);
    free(d);
    return err;
}

static svc_err_t check_owner(const rmq_consumer_t *c, const rmq_delivery_t *d,
                             char errbuf[static SVC_ERRBUF_LEN])
{
    if (d != NULL && d->owner == c)
        return SVC_OK;
    svc_errbuf_set(errbuf, "rabbitmq consumer: a delivery of another consumer");
    return SVC_EINVAL;
}

svc_err_t rmq_consumer_ack(rmq_consumer_t *c, rmq_delivery_t *d, char errbuf[static SVC_ERRBUF_LEN])
{
    svc_err_t err = check_owner(c, d, errbuf);

    if (err == SVC_OK)
        err = rmq__conn_check(c->in, errbuf);
    if (err != SVC_OK)
        return err;
    return rmq__status(c->in, amqp_basic_ack(c->in->st, RMQ__CHANNEL, d->env.delivery_tag, 0),
                       "basic.ack", errbuf);
}

/* The headers a moved copy carries: the original's, minus those this move
 * sets anew (so that they never appear twice), plus extra. */
static amqp_table_entry_t *copy_headers(const rmq_delivery_t *d, const amqp_table_entry_t *extra,
                                        int n_extra, int *n_out)
{
    const amqp_basic_properties_t *p = &d->env.message.properties;

    return rmq__headers_edit((p->_flags & AMQP_BASIC_HEADERS_FLAG) ? &p->headers : NULL, NULL, 0,
                             extra, n_extra, n_out);
}

/* Publish the copy to queue `queue` through the default exchange, with its
 * confirm; only after SVC_OK ack the original. If the ack then fails the
 * job exists twice (here and there), never zero times: consumers dedupe on
 * message-id. */
static svc_err_t move(rmq_consumer_t *c, rmq_delivery_t *d, const char *queue,
                      const amqp_table_entry_t *extra, int n_extra,
                      char errbuf[static SVC_ERRBUF_LEN])
{
    amqp_basic_properties_t p = d->env.message.properties;
    amqp_table_entry_t *headers;
    int n = 0;
    svc_err_t err = check_owner(c, d, errbuf);

    if (err == SVC_OK)
        err = rmq__conn_check(c->in, errbuf);
    if (err != SVC_OK)
        return err;
    if ((headers = copy_headers(d, extra, n_extra, &n)) == NULL) {
        svc_errbuf_set(errbuf, "rabbitmq move: out of memory");
        return SVC_ENOMEM;
    }
    p._flags |= AMQP_BASIC_HEADERS_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG;
    p.delivery_mode = AMQP_DELIVERY_PERSISTENT;
    p.headers.num_entries = n;
    p.headers.entries = headers;
    err = rmq__publish_props(c->out, "", queue, &p, d->env.message.body, errbuf);
    free(headers);
    if (err == SVC_OK)
        err = rmq_consumer_ack(c, d, errbuf);
    return err;
}

static amqp_table_entry_t int_entry(const char *key, int64_t v)
{
    amqp_table_entry_t e = {.key = amqp_cstring_bytes(key),
                            .value = {.kind = AMQP_FIELD_KIND_I64, .value.i64 = v}};
    return e;
}

svc_err_t rmq_consumer_retry(rmq_consumer_t *c, rmq_delivery_t *d, unsigned tier, int attempts,
                             char errbuf[static SVC_ERRBUF_LEN])
{
    char queue[RMQ_NAME_MAX];
    amqp_table_entry_t extra[2];

    if (tier < 1 || tier > c->t->n_tiers) {
        svc_errbuf_set(errbuf, "rabbitmq retry: tier %u is not 1..%zu", tier, c->t->n_tiers);
        return SVC_EINVAL;
    }
    rmq_topology_name(c->t, RMQ_NAME_TIER, tier, queue);
    extra[0] = int_entry(RMQ_HDR_RETRIES, (int64_t)d->retries + 1);
    extra[1] = int_entry(RMQ_HDR_ATTEMPTS, attempts);
    return move(c, d, queue, extra, 2, errbuf);
}

svc_err_t rmq_consumer_dead(rmq_consumer_t *c, rmq_delivery_t *d, const rmq_dead_info_t *why,
                            char errbuf[static SVC_ERRBUF_LEN])
{
    amqp_table_entry_t extra[4];
    char now[SVC_RFC3339_LEN];

    if (why == NULL || why->final_reason == NULL || why->final_reason[0] == '\0') {
        svc_errbuf_set(errbuf, "rabbitmq dead-letter: final_reason is required");
        return SVC_EINVAL;
    }
    extra[0].key = amqp_cstring_bytes(RMQ_HDR_FINAL_REASON);
    extra[0].value.kind = AMQP_FIELD_KIND_UTF8;
    extra[0].value.value.bytes = amqp_cstring_bytes(why->final_reason);
    extra[1] = int_entry(RMQ_HDR_HTTP_STATUS, why->last_http_status);
    extra[2] = int_entry(RMQ_HDR_ATTEMPTS, why->attempts);
    /* The copy is a client's publish, so the broker adds no x-death entry
     * for it: without this header nobody could tell when it died. */
    svc_rfc3339_now(now);
    extra[3].key = amqp_cstring_bytes(RMQ_HDR_DEAD_AT);
    extra[3].value.kind = AMQP_FIELD_KIND_UTF8;
    extra[3].value.value.bytes = amqp_cstring_bytes(now);
    return move(c, d, c->dead, extra, 4, errbuf);
}

void rmq_delivery_free(rmq_delivery_t *d)
{
    if (d == NULL)
        return;
    amqp_destroy_envelope(&d->env);
    free(d);
}

const void *rmq_delivery_body(const rmq_delivery_t *d, size_t *len)
{
    *len = d->env.message.body.len;
    return d->env.message.body.bytes;
}

const char *rmq_delivery_message_id(const rmq_delivery_t *d)
{
    return d->message_id;
}

const char *rmq_delivery_content_type(const rmq_delivery_t *d)
{
    return d->content_type;
}

const char *rmq_delivery_header(const rmq_delivery_t *d, const char *name)
{
    for (size_t i = 0; i < d->n_headers; i++)
        if (strcmp(d->h[i].name, name) == 0)
            return d->h[i].value;
    return NULL;
}

bool rmq_delivery_redelivered(const rmq_delivery_t *d)
{
    return d->env.redelivered != 0;
}

unsigned rmq_delivery_xdeath_tiers(const rmq_delivery_t *d)
{
    return d->xdeath;
}

unsigned rmq_delivery_tier_passes(const rmq_delivery_t *d)
{
    return d->retries > d->xdeath ? d->retries : d->xdeath;
}
