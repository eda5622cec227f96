/* SPDX-License-Identifier: Apache-2.0 */
/*
 * queue_ops.c - what an operator's tool does to one queue: its depth, a
 * purge, and a browse (basic.get with manual ack, every message held until
 * it is acked, moved on with a confirm, or released back to its place).
 *
 * Why basic.get and holding, rather than a consumer with prefetch: a get
 * answers get-empty when the queue has nothing more ready, so a browse
 * knows it has seen the whole queue without guessing from a timeout, and it
 * takes exactly one message per call (a consumer's prefetch would pull
 * messages the caller never asked for). Messages are held, not requeued one
 * by one, because a requeued message goes back to the head and the next get
 * would return it again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define HDR_NAME_MAX 128
#define ID_MAX       256

struct rmq_browse {
    rmq_conn_t *c;
    char queue[RMQ_NAME_MAX];
    /* Delivery tags held, ascending (the channel numbers its gets 1, 2, ...). */
    uint64_t *held;
    size_t n_held, cap_held;
    /* Bumped by a release: a message fetched before cannot be settled after
     * (its tag may mean another message on a later get). */
    unsigned epoch;
};

typedef struct fetched_header {
    char name[HDR_NAME_MAX];
    char value[RMQ_FETCHED_VALUE_MAX];
} fetched_header_t;

struct rmq_fetched {
    amqp_message_t msg; /* owns the properties and the body */
    const rmq_browse_t *owner;
    uint64_t tag;
    unsigned epoch;
    bool settled;
    char message_id[ID_MAX], content_type[ID_MAX], dead_at[RMQ_FETCHED_VALUE_MAX];
    size_t n_headers;
    fetched_header_t h[RMQ_MAX_HEADERS];
};

static svc_err_t check_queue_name(const char *queue, char errbuf[static SVC_ERRBUF_LEN])
{
    if (queue != NULL && queue[0] != '\0' && strlen(queue) < RMQ_NAME_MAX)
        return SVC_OK;
    svc_errbuf_set(errbuf, "rabbitmq queue: a name of 1..%d bytes is required", RMQ_NAME_MAX - 1);
    return SVC_EINVAL;
}

svc_err_t rmq_queue_depth(rmq_conn_t *c, const char *queue, uint32_t *ready, uint32_t *consumers,
                          char errbuf[static SVC_ERRBUF_LEN])
{
    char what[RMQ_NAME_MAX + 32];
    amqp_queue_declare_ok_t *ok;
    svc_err_t err = check_queue_name(queue, errbuf);

    if (err == SVC_OK)
        err = rmq__conn_check(c, errbuf);
    if (err != SVC_OK)
        return err;
    snprintf(what, sizeof what, "queue %s", queue);
    /* Passive: only asks; a missing queue is a 404 channel close, which
     * rmq__reply answers by reopening the channel. */
    ok = amqp_queue_declare(c->st, RMQ__CHANNEL, amqp_cstring_bytes(queue), 1, 0, 0, 0,
                            amqp_empty_table);
    err = rmq__reply(c, amqp_get_rpc_reply(c->st), what, errbuf);
    if (err == SVC_OK && ok != NULL) {
        if (ready != NULL)
            *ready = ok->message_count;
        if (consumers != NULL)
            *consumers = ok->consumer_count;
    }
    amqp_maybe_release_buffers(c->st);
    return err;
}

svc_err_t rmq_queue_purge(rmq_conn_t *c, const char *queue, uint32_t *purged,
                          char errbuf[static SVC_ERRBUF_LEN])
{
    char what[RMQ_NAME_MAX + 32];
    amqp_queue_purge_ok_t *ok;
    svc_err_t err = check_queue_name(queue, errbuf);

    if (err == SVC_OK)
        err = rmq__conn_check(c, errbuf);
    if (err != SVC_OK)
        return err;
    snprintf(what, sizeof what, "purge queue %s", queue);
    ok = amqp_queue_purge(c->st, RMQ__CHANNEL, amqp_cstring_bytes(queue));
    err = rmq__reply(c, amqp_get_rpc_reply(c->st), what, errbuf);
    if (err == SVC_OK && ok != NULL && purged != NULL)
        *purged = ok->message_count;
    amqp_maybe_release_buffers(c->st);
    return err;
}

svc_err_t rmq_browse_new(const rmq_conn_opts_t *o, const char *queue, rmq_browse_t **out,
                         uint32_t *ready, char errbuf[static SVC_ERRBUF_LEN])
{
    rmq_browse_t *b;
    svc_err_t err = check_queue_name(queue, errbuf);

    if (err != SVC_OK)
        return err;
    if ((b = calloc(1, sizeof *b)) == NULL) {
        svc_errbuf_set(errbuf, "rabbitmq browse: out of memory");
        return SVC_ENOMEM;
    }
    snprintf(b->queue, sizeof b->queue, "%s", queue);
    err = rmq__conn_open(o, true, &b->c, errbuf);
    /* Asked before anything is held, while a 404 still only costs the
     * channel (reopened). */
    if (err == SVC_OK)
        err = rmq_queue_depth(b->c, queue, ready, NULL, errbuf);
    if (err != SVC_OK) {
        rmq_browse_free(b);
        return err;
    }
    /* From here the channel holds deliveries: if the broker closes it, they
     * go back to the queue and their tags mean nothing on a reopened
     * channel (an ack there could settle another message), so a channel
     * error fails the browse instead. */
    b->c->consuming = true;
    *out = b;
    return SVC_OK;
}

void rmq_browse_free(rmq_browse_t *b)
{
    if (b == NULL)
        return;
    /* An explicit nack first, so that the messages are back before the
     * caller's next step; closing alone would requeue them too. */
    if (b->c != NULL && rmq_conn_alive(b->c) && rmq_browse_release(b, SVC_ERRBUF_SCRATCH) != SVC_OK)
        b->n_held = 0; /* the connection failed: closing it requeues them all */
    rmq_conn_free(b->c);
    free(b->held);
    free(b);
}

static svc_err_t held_reserve(rmq_browse_t *b, char errbuf[static SVC_ERRBUF_LEN])
{
    size_t cap;
    uint64_t *p;

    if (b->n_held < b->cap_held)
        return SVC_OK;
    if (b->n_held >= RMQ_BROWSE_MAX_HELD) {
        svc_errbuf_set(errbuf, "rabbitmq browse: already holding %d messages of %s",
                       RMQ_BROWSE_MAX_HELD, b->queue);
        return SVC_EEXHAUSTED;
    }
    cap = b->cap_held ? b->cap_held * 2 : 64;
    if (cap > RMQ_BROWSE_MAX_HELD)
        cap = RMQ_BROWSE_MAX_HELD;
    if ((p = realloc(b->held, cap * sizeof *p)) == NULL) {
        svc_errbuf_set(errbuf, "rabbitmq browse: out of memory");
        return SVC_ENOMEM;
    }
    b->held = p;
    b->cap_held = cap;
    return SVC_OK;
}

static void copy_bytes(char *out, size_t cap, amqp_bytes_t b)
{
    size_t n = b.len < cap - 1 ? b.len : cap - 1;

    if (n > 0)
        memcpy(out, b.bytes, n);
    out[n] = '\0';
}

/* RabbitMQ writes x-death newest first: the first entry's time is the last
 * death the broker saw. */
static void xdeath_time(const amqp_table_t *h, char *out, size_t cap)
{
    const amqp_field_value_t *xd = rmq__table_get(h, "x-death"), *t;

    if (xd == NULL || xd->kind != AMQP_FIELD_KIND_ARRAY || xd->value.array.num_entries < 1 ||
        xd->value.array.entries[0].kind != AMQP_FIELD_KIND_TABLE)
        return;
    t = rmq__table_get(&xd->value.array.entries[0].value.table, "time");
    if (t != NULL && t->kind == AMQP_FIELD_KIND_TIMESTAMP)
        rmq__field_render(t, out, cap);
}

static void fill(rmq_fetched_t *f)
{
    const amqp_basic_properties_t *p = &f->msg.properties;
    const amqp_table_t *h = (p->_flags & AMQP_BASIC_HEADERS_FLAG) ? &p->headers : NULL;
    const char *dead_at;

    if (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG)
        copy_bytes(f->message_id, sizeof f->message_id, p->message_id);
    if (p->_flags & AMQP_BASIC_CONTENT_TYPE_FLAG)
        copy_bytes(f->content_type, sizeof f->content_type, p->content_type);
    for (int i = 0; h != NULL && i < h->num_entries && f->n_headers < RMQ_MAX_HEADERS; i++) {
        fetched_header_t *t = &f->h[f->n_headers++];
        copy_bytes(t->name, sizeof t->name, h->entries[i].key);
        rmq__field_render(&h->entries[i].value, t->value, sizeof t->value);
    }
    dead_at = rmq_fetched_header(f, RMQ_HDR_DEAD_AT);
    if (dead_at != NULL)
        snprintf(f->dead_at, sizeof f->dead_at, "%s", dead_at);
    else
        xdeath_time(h, f->dead_at, sizeof f->dead_at);
}

svc_err_t rmq_browse_next(rmq_browse_t *b, rmq_fetched_t **out, char errbuf[static SVC_ERRBUF_LEN])
{
    char what[RMQ_NAME_MAX + 32];
    rmq_fetched_t *f;
    amqp_rpc_reply_t r;
    uint64_t tag;
    svc_err_t err = rmq__conn_check(b->c, errbuf);

    *out = NULL;
    if (err == SVC_OK)
        err = held_reserve(b, errbuf);
    if (err != SVC_OK)
        return err;
    if ((f = calloc(1, sizeof *f)) == NULL) {
        svc_errbuf_set(errbuf, "rabbitmq browse: out of memory");
        return SVC_ENOMEM;
    }
    snprintf(what, sizeof what, "basic.get from %s", b->queue);
    amqp_maybe_release_buffers(b->c->st);
    r = amqp_basic_get(b->c->st, RMQ__CHANNEL, amqp_cstring_bytes(b->queue), 0);
    err = rmq__reply(b->c, r, what, errbuf);
    if (err != SVC_OK || r.reply.id == AMQP_BASIC_GET_EMPTY_METHOD) {
        free(f);
        return err;
    }
    tag = ((const amqp_basic_get_ok_t *)r.reply.decoded)->delivery_tag;
    /* The message is held from the get-ok on: it is tracked before its
     * content is read, so that a release covers it whatever happens next. */
    b->held[b->n_held++] = tag;
    r = amqp_read_message(b->c->st, RMQ__CHANNEL, &f->msg, 0);
    if (r.reply_type != AMQP_RESPONSE_NORMAL) {
        free(f);
        if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION)
            return rmq__reply(b->c, r, what, errbuf);
        return rmq__conn_fail(b->c, SVC_EUNAVAIL, errbuf, "%s: reading the message: %s", what,
                              amqp_error_string2(r.library_error));
    }
    f->owner = b;
    f->tag = tag;
    f->epoch = b->epoch;
    fill(f);
    *out = f;
    return SVC_OK;
}

svc_err_t rmq_browse_release(rmq_browse_t *b, char errbuf[static SVC_ERRBUF_LEN])
{
    svc_err_t err = rmq__conn_check(b->c, errbuf);
    int st;

    if (err != SVC_OK || b->n_held == 0)
        return err;
    /* One nack for all: "multiple" settles every unacked tag up to the
     * newest held one; those acked or moved in between are no longer
     * unacked and are not touched. */
    st = amqp_basic_nack(b->c->st, RMQ__CHANNEL, b->held[b->n_held - 1], 1, 1);
    b->n_held = 0;
    b->epoch++;
    return rmq__status(b->c, st, "basic.nack (release)", errbuf);
}

static svc_err_t check_held(const rmq_browse_t *b, const rmq_fetched_t *f,
                            char errbuf[static SVC_ERRBUF_LEN])
{
    if (f == NULL || f->owner != b) {
        svc_errbuf_set(errbuf, "rabbitmq browse: a message of another browse");
        return SVC_EINVAL;
    }
    if (f->settled || f->epoch != b->epoch) {
        svc_errbuf_set(errbuf, "rabbitmq browse: message %s was already settled or released",
                       f->message_id);
        return SVC_EINVAL;
    }
    return rmq__conn_check(b->c, errbuf);
}

svc_err_t rmq_browse_ack(rmq_browse_t *b, rmq_fetched_t *f, char errbuf[static SVC_ERRBUF_LEN])
{
    svc_err_t err = check_held(b, f, errbuf);
    int st;

    if (err != SVC_OK)
        return err;
    st = amqp_basic_ack(b->c->st, RMQ__CHANNEL, f->tag, 0);
    err = rmq__status(b->c, st, "basic.ack", errbuf);
    if (err != SVC_OK)
        return err;
    f->settled = true;
    for (size_t i = 0; i < b->n_held; i++) {
        if (b->held[i] == f->tag) {
            memmove(&b->held[i], &b->held[i + 1], (b->n_held - i - 1) * sizeof b->held[0]);
            b->n_held--;
            break;
        }
    }
    return SVC_OK;
}

static const char *const replay_drop[] = {
    RMQ_HDR_FINAL_REASON, RMQ_HDR_HTTP_STATUS, RMQ_HDR_ATTEMPTS, RMQ_HDR_DEAD_AT, "x-death",
    "x-first-death-*",    "x-last-death-*",
};
static const rmq_header_t replay_set[] = {{RMQ_HDR_RETRIES, "0"}};
static const rmq_header_edit_t replay_edit = {
    .drop = replay_drop,
    .n_drop = SVC_COUNTOF(replay_drop),
    .set = replay_set,
    .n_set = SVC_COUNTOF(replay_set),
};

const rmq_header_edit_t *rmq_header_edit_replay(void)
{
    return &replay_edit;
}

svc_err_t rmq_browse_move(rmq_browse_t *b, rmq_fetched_t *f, const char *exchange,
                          const char *routing_key, const rmq_header_edit_t *edit,
                          char errbuf[static SVC_ERRBUF_LEN])
{
    static const rmq_header_edit_t none = {0};
    amqp_table_entry_t set[RMQ_MAX_HEADERS], *headers;
    amqp_basic_properties_t p;
    int n = 0;
    svc_err_t err = check_held(b, f, errbuf);

    if (err != SVC_OK)
        return err;
    if (edit == NULL)
        edit = &none;
    if (exchange == NULL || routing_key == NULL || edit->n_set > RMQ_MAX_HEADERS ||
        (edit->n_set > 0 && edit->set == NULL) || (edit->n_drop > 0 && edit->drop == NULL)) {
        svc_errbuf_set(errbuf,
                       "rabbitmq move: exchange and routing key are required; at most "
                       "%d headers set",
                       RMQ_MAX_HEADERS);
        return SVC_EINVAL;
    }
    for (size_t i = 0; i < edit->n_set; i++) {
        set[i].key = amqp_cstring_bytes(edit->set[i].name);
        set[i].value.kind = AMQP_FIELD_KIND_UTF8;
        set[i].value.value.bytes = amqp_cstring_bytes(edit->set[i].value);
    }
    p = f->msg.properties;
    headers = rmq__headers_edit((p._flags & AMQP_BASIC_HEADERS_FLAG) ? &p.headers : NULL,
                                edit->drop, edit->n_drop, set, (int)edit->n_set, &n);
    if (headers == NULL) {
        svc_errbuf_set(errbuf, "rabbitmq move: out of memory");
        return SVC_ENOMEM;
    }
    p._flags |= AMQP_BASIC_HEADERS_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG;
    p.delivery_mode = AMQP_DELIVERY_PERSISTENT;
    p.headers.num_entries = n;
    p.headers.entries = headers;
    err = rmq__publish_props(b->c, exchange, routing_key, &p, f->msg.body, errbuf);
    free(headers);
    if (err == SVC_OK)
        err = rmq_browse_ack(b, f, errbuf);
    return err;
}

void rmq_fetched_free(rmq_fetched_t *f)
{
    if (f == NULL)
        return;
    amqp_destroy_message(&f->msg);
    free(f);
}

const void *rmq_fetched_body(const rmq_fetched_t *f, size_t *len)
{
    *len = f->msg.body.len;
    return f->msg.body.bytes;
}

const char *rmq_fetched_message_id(const rmq_fetched_t *f)
{
    return f->message_id;
}

const char *rmq_fetched_content_type(const rmq_fetched_t *f)
{
    return f->content_type;
}

size_t rmq_fetched_header_count(const rmq_fetched_t *f)
{
    return f->n_headers;
}

const char *rmq_fetched_header_at(const rmq_fetched_t *f, size_t i, const char **name)
{
    if (i >= f->n_headers) {
        *name = NULL;
        return NULL;
    }
    *name = f->h[i].name;
    return f->h[i].value;
}

const char *rmq_fetched_header(const rmq_fetched_t *f, const char *name)
{
    for (size_t i = 0; i < f->n_headers; i++)
        if (strcmp(f->h[i].name, name) == 0)
            return f->h[i].value;
    return NULL;
}

const char *rmq_fetched_dead_at(const rmq_fetched_t *f)
{
    return f->dead_at;
}
