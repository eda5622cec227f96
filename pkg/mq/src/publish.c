/* SPDX-License-Identifier: Apache-2.0 */
/*
 * publish.c - one persistent, mandatory publish and the wait for its
 * confirm. One message at a time on purpose: a job is published because
 * something else (a Kafka offset, a consumed original) waits for exactly
 * its outcome, and no return can then be taken for another message's.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define DEFAULT_CONTENT_TYPE "application/octet-stream"

static svc_err_t check_message(const rmq_message_t *m, char errbuf[static SVC_ERRBUF_LEN])
{
    const char *bad = NULL;

    /* message-id, content-type and header names are AMQP short strings. */
    if (m->message_id == NULL || m->message_id[0] == '\0' || strlen(m->message_id) > 255)
        bad = "message_id is required (1..255 bytes)";
    else if (m->content_type != NULL && strlen(m->content_type) > 255)
        bad = "content_type is longer than 255 bytes";
    else if (m->body_len > 0 && m->body == NULL)
        bad = "body is NULL with body_len > 0";
    else if (m->n_headers > RMQ_MAX_HEADERS || (m->n_headers > 0 && m->headers == NULL))
        bad = "too many headers (RMQ_MAX_HEADERS), or headers is NULL";
    for (size_t i = 0; bad == NULL && i < m->n_headers; i++)
        if (m->headers[i].name == NULL || m->headers[i].name[0] == '\0' ||
            strlen(m->headers[i].name) > 255 || m->headers[i].value == NULL)
            bad = "a header without a name (1..255 bytes) or a value";
    if (bad == NULL)
        return SVC_OK;
    svc_errbuf_set(errbuf, "rabbitmq publish: %s", bad);
    return SVC_EINVAL;
}

svc_err_t rmq_publish_to(rmq_conn_t *c, const char *exchange, const char *routing_key,
                         const rmq_message_t *m, char errbuf[static SVC_ERRBUF_LEN])
{
    amqp_table_entry_t entries[RMQ_MAX_HEADERS];
    amqp_basic_properties_t p;
    svc_err_t err = check_message(m, errbuf);

    if (err != SVC_OK)
        return err;
    memset(&p, 0, sizeof p);
    for (size_t i = 0; i < m->n_headers; i++) {
        entries[i].key = amqp_cstring_bytes(m->headers[i].name);
        entries[i].value.kind = AMQP_FIELD_KIND_UTF8;
        entries[i].value.value.bytes = amqp_cstring_bytes(m->headers[i].value);
    }
    p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
               AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_HEADERS_FLAG;
    p.content_type = amqp_cstring_bytes(m->content_type ? m->content_type : DEFAULT_CONTENT_TYPE);
    p.delivery_mode = AMQP_DELIVERY_PERSISTENT;
    p.message_id = amqp_cstring_bytes(m->message_id);
    p.headers.num_entries = (int)m->n_headers;
    p.headers.entries = entries;
    return rmq__publish_props(c, exchange, routing_key, &p,
                              (amqp_bytes_t){.len = m->body_len, .bytes = (void *)m->body}, errbuf);
}

svc_err_t rmq_publish(rmq_conn_t *c, const rmq_topology_t *t, const rmq_message_t *m,
                      char errbuf[static SVC_ERRBUF_LEN])
{
    char exchange[RMQ_NAME_MAX];
    svc_err_t err = rmq_topology_validate(t, errbuf);

    if (err != SVC_OK)
        return err;
    rmq_topology_name(t, RMQ_NAME_EXCHANGE, 0, exchange);
    return rmq_publish_to(c, exchange, RMQ_WORK_KEY, m, errbuf);
}

/* One frame before deadline_ms. SVC_ETIMEDOUT when none came. */
static svc_err_t next_frame(rmq_conn_t *c, uint64_t deadline_ms, amqp_frame_t *f,
                            char errbuf[static SVC_ERRBUF_LEN])
{
    for (;;) {
        int left = rmq__ms_left(deadline_ms), st;
        struct timeval tv = rmq__tv(left);

        if (left == 0)
            return SVC_ETIMEDOUT;
        st = amqp_simple_wait_frame_noblock(c->st, f, &tv);
        if (st == AMQP_STATUS_OK)
            return SVC_OK;
        if (st != AMQP_STATUS_TIMEOUT)
            return rmq__status(c, st, "waiting for the confirm", errbuf);
    }
}

/* The header and body frames that follow a basic.return: read and dropped
 * (the caller still has the message it published). */
static svc_err_t skip_content(rmq_conn_t *c, uint64_t deadline_ms,
                              char errbuf[static SVC_ERRBUF_LEN])
{
    amqp_frame_t f;
    uint64_t size, got = 0;
    svc_err_t err = next_frame(c, deadline_ms, &f, errbuf);

    if (err != SVC_OK)
        return err;
    if (f.frame_type != AMQP_FRAME_HEADER)
        return rmq__conn_fail(c, SVC_EINTERNAL, errbuf, "basic.return without a content header");
    size = f.payload.properties.body_size;
    while (got < size) {
        err = next_frame(c, deadline_ms, &f, errbuf);
        if (err != SVC_OK)
            return err;
        if (f.frame_type != AMQP_FRAME_BODY)
            return rmq__conn_fail(c, SVC_EINTERNAL, errbuf, "basic.return body cut short");
        got += f.payload.body_fragment.len;
    }
    return SVC_OK;
}

/* True when an ack or nack with this tag and flag settles seq. */
static bool settles(uint64_t tag, bool multiple, uint64_t seq)
{
    return tag == seq || (multiple && tag >= seq);
}

/* Waits for seq's basic.ack or basic.nack. For a mandatory message that no
 * queue took, RabbitMQ sends basic.return first and then acks it (the
 * broker is done with it: it dropped it), so a return seen before the ack
 * makes the outcome SVC_ENOTFOUND. */
static svc_err_t wait_confirm(rmq_conn_t *c, uint64_t seq, char errbuf[static SVC_ERRBUF_LEN])
{
    uint64_t deadline = svc_now_ms() + (uint64_t)c->io_timeout_ms;
    char returned[SVC_ERRBUF_LEN] = "";
    amqp_frame_t f;

    for (;;) {
        svc_err_t err = next_frame(c, deadline, &f, errbuf);

        /* A late confirm or return would be taken for the next message's:
         * the connection is given up instead. */
        if (err == SVC_ETIMEDOUT)
            return rmq__conn_fail(c, SVC_ETIMEDOUT, errbuf,
                                  "no confirm within %d ms (publish %llu)", c->io_timeout_ms,
                                  (unsigned long long)seq);
        if (err != SVC_OK)
            return err;
        if (f.frame_type != AMQP_FRAME_METHOD)
            continue;
        switch (f.payload.method.id) {
        case AMQP_BASIC_RETURN_METHOD: {
            const amqp_basic_return_t *r = f.payload.method.decoded;
            snprintf(returned, sizeof returned,
                     "unroutable: broker returned it: %d %.*s (exchange %.*s, key %.*s)",
                     r->reply_code, (int)r->reply_text.len, (const char *)r->reply_text.bytes,
                     (int)r->exchange.len, (const char *)r->exchange.bytes, (int)r->routing_key.len,
                     (const char *)r->routing_key.bytes);
            err = skip_content(c, deadline, errbuf);
            if (err != SVC_OK)
                return err;
            break;
        }
        case AMQP_BASIC_ACK_METHOD: {
            const amqp_basic_ack_t *a = f.payload.method.decoded;
            if (!settles(a->delivery_tag, a->multiple, seq))
                break;
            if (returned[0] == '\0')
                return SVC_OK;
            svc_errbuf_set(errbuf, "%s", returned);
            return SVC_ENOTFOUND;
        }
        case AMQP_BASIC_NACK_METHOD: {
            const amqp_basic_nack_t *n = f.payload.method.decoded;
            if (!settles(n->delivery_tag, n->multiple, seq))
                break;
            svc_errbuf_set(errbuf, "the broker refused the message (basic.nack)");
            return SVC_EUNAVAIL;
        }
        default:
            err = rmq__unexpected_method(c, &f, errbuf);
            if (err != SVC_OK)
                return err;
        }
    }
}

svc_err_t rmq__publish_props(rmq_conn_t *c, const char *exchange, const char *routing_key,
                             const amqp_basic_properties_t *props, amqp_bytes_t body,
                             char errbuf[static SVC_ERRBUF_LEN])
{
    svc_err_t err = rmq__conn_check(c, errbuf);
    int st;

    if (err != SVC_OK)
        return err;
    st = amqp_basic_publish(c->st, RMQ__CHANNEL, amqp_cstring_bytes(exchange),
                            amqp_cstring_bytes(routing_key), 1, 0, props, body);
    if (st != AMQP_STATUS_OK)
        return rmq__status(c, st, "basic.publish", errbuf);
    err = wait_confirm(c, c->next_seq++, errbuf);
    /* The frames of the wait live in the connection's pool until released. */
    amqp_maybe_release_buffers(c->st);
    return err;
}
