/* SPDX-License-Identifier: Apache-2.0 */
/*
 * conn.c - one AMQP connection with one channel: options, connect and
 * login with bounds, the mapping of rabbitmq-c's replies to svc_err_t, and
 * the rule that a connection that failed stays failed and says why.
 */
#include <amqp_tcp_socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "internal.h"

void rmq_conn_opts_init(rmq_conn_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->host = RMQ_DEFAULT_HOST;
    o->port = RMQ_DEFAULT_PORT;
    o->vhost = RMQ_DEFAULT_VHOST;
    o->user = RMQ_DEFAULT_USER;
    o->password = RMQ_DEFAULT_PASSWORD;
    o->heartbeat_s = RMQ_DEFAULT_HEARTBEAT_S;
    o->connect_timeout_ms = RMQ_DEFAULT_CONNECT_TIMEOUT_MS;
    o->io_timeout_ms = RMQ_DEFAULT_IO_TIMEOUT_MS;
    o->name = RMQ_DEFAULT_CONN_NAME;
}

static bool empty(const char *s)
{
    return s == NULL || s[0] == '\0';
}

svc_err_t rmq_conn_opts_validate(const rmq_conn_opts_t *o, char errbuf[static SVC_ERRBUF_LEN])
{
    const char *bad = NULL;

    if (empty(o->host))
        bad = "host is required";
    else if (o->port < 1 || o->port > 65535)
        bad = "port must be 1..65535";
    else if (empty(o->vhost) || empty(o->user) || o->password == NULL)
        bad = "vhost, user and password are required";
    else if (o->heartbeat_s < 0 || o->heartbeat_s > 600)
        bad = "heartbeat_s must be 0..600";
    else if (o->connect_timeout_ms < 100 || o->connect_timeout_ms > 120000)
        bad = "connect_timeout_ms must be 100..120000";
    else if (o->io_timeout_ms < 100 || o->io_timeout_ms > 120000)
        bad = "io_timeout_ms must be 100..120000";
    else if (o->name == NULL || strlen(o->name) >= sizeof(((rmq_conn_t *)0)->name))
        bad = "name must be set and shorter than 64 bytes";
    if (bad == NULL)
        return SVC_OK;
    svc_errbuf_set(errbuf, "rabbitmq connection: %s", bad);
    return SVC_EINVAL;
}

struct timeval rmq__tv(int ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    return tv;
}

int rmq__ms_left(uint64_t deadline_ms)
{
    uint64_t now = svc_now_ms();

    return now >= deadline_ms ? 0 : (int)(deadline_ms - now);
}

svc_err_t rmq__conn_check(rmq_conn_t *c, char errbuf[static SVC_ERRBUF_LEN])
{
    if (!c->dead)
        return SVC_OK;
    svc_errbuf_set(errbuf, "rabbitmq connection %s is dead: %s", c->name, c->why);
    return SVC_EUNAVAIL;
}

svc_err_t rmq__conn_fail(rmq_conn_t *c, svc_err_t err, char errbuf[static SVC_ERRBUF_LEN],
                         const char *fmt, ...)
{
    char why[SVC_ERRBUF_LEN], kv[128];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (!c->dead) {
        c->dead = true;
        snprintf(c->why, sizeof c->why, "%s", why);
        snprintf(kv, sizeof kv, " conn=%s err=%s", c->name, svc_err_name(err));
        if (svc_log_enabled(SVC_LOG_WARN))
            svc_log_write(SVC_LOG_WARN, RMQ__LOG_MODULE, kv, "connection failed: %s", why);
    }
    svc_errbuf_set(errbuf, "%s", why);
    return err;
}

svc_err_t rmq__status(rmq_conn_t *c, int status, const char *what,
                      char errbuf[static SVC_ERRBUF_LEN])
{
    if (status == AMQP_STATUS_OK)
        return SVC_OK;
    /* After a timeout rabbitmq-c may have sent or read half a frame: the
     * connection cannot be trusted any more, so it is failed like the rest. */
    return rmq__conn_fail(c, status == AMQP_STATUS_TIMEOUT ? SVC_ETIMEDOUT : SVC_EUNAVAIL, errbuf,
                          "%s: %s", what, amqp_error_string2(status));
}

/* Channel-level reply codes (AMQP 0-9-1 constants) to our errors. */
static svc_err_t err_from_code(int code)
{
    switch (code) {
    case AMQP_NOT_FOUND:
        return SVC_ENOTFOUND;
    case AMQP_PRECONDITION_FAILED:
        return SVC_EPRECOND;
    case AMQP_ACCESS_REFUSED:
        return SVC_EPERM;
    case AMQP_RESOURCE_LOCKED:
        return SVC_EABORTED;
    case AMQP_NOT_ALLOWED:
        return SVC_EPERM;
    case AMQP_RESOURCE_ERROR:
        return SVC_EEXHAUSTED;
    default:
        return SVC_EINTERNAL;
    }
}

/* The broker closed the channel (a declare with other arguments, a publish
 * to a missing exchange): answer close-ok and open it again, so that one bad
 * request does not cost the connection. */
static svc_err_t channel_reopen(rmq_conn_t *c, char errbuf[static SVC_ERRBUF_LEN])
{
    amqp_channel_close_ok_t ok = {0};
    amqp_rpc_reply_t r;
    int st;

    st = amqp_send_method(c->st, RMQ__CHANNEL, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
    if (st != AMQP_STATUS_OK)
        return rmq__status(c, st, "channel.close-ok", errbuf);
    amqp_channel_open(c->st, RMQ__CHANNEL);
    r = amqp_get_rpc_reply(c->st);
    if (r.reply_type != AMQP_RESPONSE_NORMAL)
        return rmq__conn_fail(c, SVC_EUNAVAIL, errbuf, "reopening the channel failed");
    c->next_seq = 1;
    if (c->confirm) {
        amqp_confirm_select(c->st, RMQ__CHANNEL);
        r = amqp_get_rpc_reply(c->st);
        if (r.reply_type != AMQP_RESPONSE_NORMAL)
            return rmq__conn_fail(c, SVC_EUNAVAIL, errbuf,
                                  "confirm.select on the reopened channel failed");
    }
    return SVC_OK;
}

static svc_err_t server_close(rmq_conn_t *c, const amqp_method_t *m, const char *what,
                              char errbuf[static SVC_ERRBUF_LEN])
{
    if (m->id == AMQP_CHANNEL_CLOSE_METHOD) {
        const amqp_channel_close_t *cc = m->decoded;
        svc_err_t err = err_from_code(cc->reply_code);
        char reason[SVC_ERRBUF_LEN];

        snprintf(reason, sizeof reason, "%s: broker closed the channel: %d %.*s", what,
                 cc->reply_code, (int)cc->reply_text.len, (const char *)cc->reply_text.bytes);
        if (c->consuming)
            return rmq__conn_fail(c, SVC_EUNAVAIL, errbuf, "%s (the consumer is gone)", reason);
        if (channel_reopen(c, SVC_ERRBUF_SCRATCH) != SVC_OK)
            return rmq__conn_fail(c, SVC_EUNAVAIL, errbuf,
                                  "%s; then the channel could not be reopened", reason);
        svc_errbuf_set(errbuf, "%s", reason);
        return err;
    }
    if (m->id == AMQP_CONNECTION_CLOSE_METHOD) {
        const amqp_connection_close_t *cc = m->decoded;
        amqp_connection_close_ok_t ok = {0};
        svc_err_t err = cc->reply_code == AMQP_ACCESS_REFUSED ? SVC_EUNAUTH
                        : cc->reply_code == AMQP_NOT_ALLOWED  ? SVC_EPERM
                                                              : SVC_EUNAVAIL;

        (void)amqp_send_method(c->st, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
        return rmq__conn_fail(c, err, errbuf, "%s: broker closed the connection: %d %.*s", what,
                              cc->reply_code, (int)cc->reply_text.len,
                              (const char *)cc->reply_text.bytes);
    }
    return rmq__conn_fail(c, SVC_EINTERNAL, errbuf, "%s: unexpected method 0x%08x from the broker",
                          what, (unsigned)m->id);
}

svc_err_t rmq__reply(rmq_conn_t *c, amqp_rpc_reply_t r, const char *what,
                     char errbuf[static SVC_ERRBUF_LEN])
{
    switch (r.reply_type) {
    case AMQP_RESPONSE_NORMAL:
        return SVC_OK;
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
        return rmq__status(c, r.library_error, what, errbuf);
    case AMQP_RESPONSE_SERVER_EXCEPTION:
        return server_close(c, &r.reply, what, errbuf);
    case AMQP_RESPONSE_NONE:
        break;
    }
    return rmq__conn_fail(c, SVC_EINTERNAL, errbuf, "%s: no reply", what);
}

svc_err_t rmq__unexpected_method(rmq_conn_t *c, const amqp_frame_t *f,
                                 char errbuf[static SVC_ERRBUF_LEN])
{
    amqp_method_t m = f->payload.method;

    if (m.id == AMQP_CHANNEL_CLOSE_METHOD || m.id == AMQP_CONNECTION_CLOSE_METHOD) {
        svc_err_t err = server_close(c, &m, "waiting", errbuf);
        return err == SVC_OK ? SVC_EUNAVAIL : err;
    }
    return SVC_OK;
}

/* Bounds writes to a broker that vanished (no RST: a cable, a paused VM):
 * rabbitmq-c writes a publish with no deadline of its own, and the kernel
 * would retransmit for ~15 minutes. A broker that is alive but blocks
 * publishers (resource alarm) still takes small messages into the socket
 * buffer; the confirm's wait bounds that case. */
static void socket_bounds(amqp_socket_t *s, int io_timeout_ms)
{
    int fd = amqp_socket_get_sockfd(s);
    unsigned int ms = (unsigned int)io_timeout_ms;

    if (fd >= 0)
        (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof ms);
}

static svc_err_t login(rmq_conn_t *c, const rmq_conn_opts_t *o, char errbuf[static SVC_ERRBUF_LEN])
{
    amqp_table_entry_t prop = {
        .key = amqp_cstring_bytes("connection_name"),
        .value = {.kind = AMQP_FIELD_KIND_UTF8, .value.bytes = amqp_cstring_bytes(c->name)}};
    amqp_table_t props = {.num_entries = 1, .entries = &prop};
    struct timeval hs = rmq__tv(o->connect_timeout_ms), io = rmq__tv(o->io_timeout_ms);
    amqp_rpc_reply_t r;

    amqp_set_handshake_timeout(c->st, &hs);
    /* Every RPC (declare, channel.open, qos) gets the io bound; rabbitmq-c
     * closes the connection when one expires, which rmq__reply reports. */
    amqp_set_rpc_timeout(c->st, &io);
    r = amqp_login_with_properties(c->st, o->vhost, 0, 131072, o->heartbeat_s, &props,
                                   AMQP_SASL_METHOD_PLAIN, o->user, o->password);
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
        r.library_error == AMQP_STATUS_CONNECTION_CLOSED)
        /* RabbitMQ closes the socket without a reason on a bad password. */
        return rmq__conn_fail(c, SVC_EUNAUTH, errbuf, "login as %s to vhost %s refused", o->user,
                              o->vhost);
    return rmq__reply(c, r, "login", errbuf);
}

static svc_err_t open_channel(rmq_conn_t *c, char errbuf[static SVC_ERRBUF_LEN])
{
    svc_err_t err;

    amqp_channel_open(c->st, RMQ__CHANNEL);
    err = rmq__reply(c, amqp_get_rpc_reply(c->st), "channel.open", errbuf);
    if (err != SVC_OK || !c->confirm)
        return err;
    /* Confirm mode: the broker acks every publish once it has taken
     * responsibility for it (for a persistent message in a durable queue:
     * written to disk). Delivery tags count from 1 on this channel. */
    amqp_confirm_select(c->st, RMQ__CHANNEL);
    c->next_seq = 1;
    return rmq__reply(c, amqp_get_rpc_reply(c->st), "confirm.select", errbuf);
}

svc_err_t rmq__conn_open(const rmq_conn_opts_t *o, bool confirm, rmq_conn_t **out,
                         char errbuf[static SVC_ERRBUF_LEN])
{
    rmq_conn_t *c = NULL;
    amqp_socket_t *s;
    struct timeval tv;
    char kv[160];
    int st;
    svc_err_t err = rmq_conn_opts_validate(o, errbuf);

    if (err != SVC_OK)
        return err;
    c = calloc(1, sizeof *c);
    if (c == NULL || (c->st = amqp_new_connection()) == NULL) {
        free(c);
        svc_errbuf_set(errbuf, "rabbitmq connection: out of memory");
        return SVC_ENOMEM;
    }
    snprintf(c->name, sizeof c->name, "%s", o->name);
    c->io_timeout_ms = o->io_timeout_ms;
    c->confirm = confirm;
    s = amqp_tcp_socket_new(c->st);
    tv = rmq__tv(o->connect_timeout_ms);
    st = s == NULL ? AMQP_STATUS_NO_MEMORY : amqp_socket_open_noblock(s, o->host, o->port, &tv);
    if (st != AMQP_STATUS_OK) {
        err = rmq__conn_fail(c, st == AMQP_STATUS_TIMEOUT ? SVC_ETIMEDOUT : SVC_EUNAVAIL, errbuf,
                             "connect to %s:%d: %s", o->host, o->port, amqp_error_string2(st));
        goto out;
    }
    socket_bounds(s, o->io_timeout_ms);
    err = login(c, o, errbuf);
    if (err == SVC_OK)
        err = open_channel(c, errbuf);
    if (err == SVC_OK) {
        snprintf(kv, sizeof kv, " conn=%s host=%s port=%d vhost=%s heartbeat_s=%d", c->name,
                 o->host, o->port, o->vhost, amqp_get_heartbeat(c->st));
        if (svc_log_enabled(SVC_LOG_INFO))
            svc_log_write(SVC_LOG_INFO, RMQ__LOG_MODULE, kv, "connected");
    }
out:
    if (err != SVC_OK) {
        (void)amqp_destroy_connection(c->st);
        free(c);
        return err;
    }
    *out = c;
    return SVC_OK;
}

svc_err_t rmq_conn_new(const rmq_conn_opts_t *o, rmq_conn_t **out,
                       char errbuf[static SVC_ERRBUF_LEN])
{
    return rmq__conn_open(o, true, out, errbuf);
}

void rmq_conn_free(rmq_conn_t *c)
{
    if (c == NULL)
        return;
    /* A clean close tells the broker to requeue what this connection held
     * unacked at once instead of after the heartbeat timeout. Both calls are
     * RPCs bounded by the io timeout; on a dead connection they are skipped. */
    if (!c->dead) {
        (void)amqp_channel_close(c->st, RMQ__CHANNEL, AMQP_REPLY_SUCCESS);
        (void)amqp_connection_close(c->st, AMQP_REPLY_SUCCESS);
    }
    (void)amqp_destroy_connection(c->st);
    free(c);
}

svc_err_t rmq_conn_keepalive(rmq_conn_t *c, char errbuf[static SVC_ERRBUF_LEN])
{
    struct timeval zero = {0, 0};
    amqp_frame_t f;
    svc_err_t err = rmq__conn_check(c, errbuf);
    int st;

    if (err != SVC_OK)
        return err;
    /* A zero wait reads what is buffered and lets rabbitmq-c send a due
     * heartbeat; nothing else is expected on a publishing channel between
     * publishes (each publish waits for its own confirm). */
    st = amqp_simple_wait_frame_noblock(c->st, &f, &zero);
    if (st == AMQP_STATUS_TIMEOUT)
        return SVC_OK;
    if (st != AMQP_STATUS_OK)
        return rmq__status(c, st, "keepalive", errbuf);
    err = f.frame_type == AMQP_FRAME_METHOD ? rmq__unexpected_method(c, &f, errbuf) : SVC_OK;
    amqp_maybe_release_buffers(c->st);
    return err;
}

bool rmq_conn_alive(const rmq_conn_t *c)
{
    return c != NULL && !c->dead;
}
