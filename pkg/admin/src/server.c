/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server.c - the admin listener's socket and thread (see admin.h).
 *
 * One thread polls the listening socket, a stop pipe and every open
 * connection. Sockets stay blocking: a recv follows a POLLIN, and a send is
 * bounded by SO_SNDTIMEO, so a client that does not read cannot hold the
 * thread longer than read_timeout_ms.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include "internal.h"

typedef struct conn {
    int fd;
    uint64_t deadline_ms;
    size_t len;
    char *buf; /* max_request_bytes + 1: always NUL-terminated */
} conn_t;

struct admin_server {
    admin_opts_t o;
    int lfd, port, stop[2];
    pthread_t thread;
    conn_t *conns; /* max_conns; fd -1 = free */
};

void admin_opts_init(admin_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->listen = ADMIN_DEFAULT_LISTEN;
    o->max_request_bytes = ADMIN_DEFAULT_MAX_REQUEST_BYTES;
    o->max_conns = ADMIN_DEFAULT_MAX_CONNS;
    o->read_timeout_ms = ADMIN_DEFAULT_READ_TIMEOUT_MS;
    o->max_response_bytes = ADMIN_DEFAULT_MAX_RESPONSE_BYTES;
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* gone or too slow: the response is dropped */
        p += w;
        n -= (size_t)w;
    }
}

static void reply(admin_server_t *s, int fd, int status, const char *ctype, const char *headers,
                  const char *body, size_t n)
{
    admin_buf_t out;

    admin__buf_init(&out, n + 512);
    admin__response_with(&out, status, ctype, headers, body, n);
    if (!out.overflow)
        send_all(fd, out.data, out.len);
    admin__buf_dispose(&out);
}

static void reply_text(admin_server_t *s, int fd, int status, const char *text)
{
    reply(s, fd, status, "text/plain; charset=utf-8", "", text, strlen(text));
}

/* Runs the route's callback and answers. */
static void serve(admin_server_t *s, int fd, admin__route_t route)
{
    admin_buf_t body;
    int status = 200;
    const char *ctype = "application/json";

    admin__buf_init(&body, s->o.max_response_bytes);
    if (route == ADMIN__HEALTHZ) {
        reply_text(s, fd, 200, "ok\n");
    } else {
        if (route == ADMIN__METRICS) {
            ctype = "text/plain; version=0.0.4; charset=utf-8";
            if (s->o.metrics != NULL)
                s->o.metrics(s->o.ctx, &body);
        } else if (s->o.ready == NULL) {
            admin_buf_printf(&body, "{\"status\":\"ok\",\"checks\":[]}\n");
        } else if (!s->o.ready(s->o.ctx, &body)) {
            status = 503;
        }
        if (body.overflow)
            reply_text(s, fd, 500, "response too large\n");
        else
            reply(s, fd, status, ctype, "", body.data ? body.data : "", body.len);
    }
    admin__buf_dispose(&body);
}

/* Runs the debug callback. The request's pieces are cut out of the
 * connection's buffer in place: it is closed right after. */
static void serve_debug(admin_server_t *s, int fd, admin__req_t *r)
{
    char method[8];
    admin_request_t req;
    admin_buf_t body;
    int status;

    snprintf(method, sizeof method, "%.*s", (int)r->method_len, r->method);
    ((char *)r->path)[r->path_len] = '\0';
    if (r->query != NULL)
        ((char *)r->query)[r->query_len] = '\0';
    req = (admin_request_t){method, r->path, r->query != NULL ? r->query : "",
                            r->body != NULL ? r->body : "", r->body_len};
    admin__buf_init(&body, s->o.max_response_bytes);
    status = s->o.debug(s->o.debug_ctx, &req, &body);
    if (status < 200 || status > 599)
        status = 500;
    if (body.overflow)
        reply_text(s, fd, 500, "response too large\n");
    else
        reply(s, fd, status, body.ctype != NULL ? body.ctype : "application/json",
              body.any_origin ? "Access-Control-Allow-Origin: *\r\n" : "",
              body.data ? body.data : "", body.len);
    admin__buf_dispose(&body);
}

static void conn_close(conn_t *c)
{
    close(c->fd);
    c->fd = -1;
    c->len = 0;
}

static const char *status_text(int st)
{
    switch (st) {
    case 404:
        return "not found\n";
    case 405:
        return "method not allowed\n";
    case 413:
        return "a request body is not accepted\n";
    case 431:
        return "request head too large\n";
    default:
        return "bad request\n";
    }
}

static void conn_read(admin_server_t *s, conn_t *c)
{
    size_t room = s->o.max_request_bytes - c->len;
    ssize_t n = recv(c->fd, c->buf + c->len, room, 0);
    admin__req_t req;
    int st;

    if (n <= 0) {
        if (n < 0 && errno == EINTR)
            return;
        conn_close(c);
        return;
    }
    c->len += (size_t)n;
    c->buf[c->len] = '\0';
    st = admin__parse_req(c->buf, c->len, s->o.max_request_bytes, s->o.debug != NULL, &req);
    if (st == 0)
        return;
    if (st == 200 && req.route == ADMIN__DEBUG)
        serve_debug(s, c->fd, &req);
    else if (st == 200)
        serve(s, c->fd, req.route);
    else
        reply_text(s, c->fd, st, status_text(st));
    conn_close(c);
}

static void conn_accept(admin_server_t *s)
{
    struct timeval tv = {.tv_sec = s->o.read_timeout_ms / 1000,
                         .tv_usec = (s->o.read_timeout_ms % 1000) * 1000};
    int fd = accept(s->lfd, NULL, NULL);

    if (fd < 0)
        return;
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    for (unsigned i = 0; i < s->o.max_conns; i++) {
        if (s->conns[i].fd < 0) {
            s->conns[i].fd = fd;
            s->conns[i].len = 0;
            s->conns[i].deadline_ms = svc_now_ms() + (uint64_t)s->o.read_timeout_ms;
            return;
        }
    }
    /* Full: say so at once rather than leave it waiting in the backlog. */
    reply_text(s, fd, 503, "too many admin connections\n");
    close(fd);
}

/* Closes connections past their deadline; the poll timeout to the next. */
static int expire(admin_server_t *s)
{
    uint64_t now = svc_now_ms(), next = UINT64_MAX;

    for (unsigned i = 0; i < s->o.max_conns; i++) {
        conn_t *c = &s->conns[i];
        if (c->fd < 0)
            continue;
        if (now >= c->deadline_ms) {
            reply_text(s, c->fd, 408, "request timeout\n");
            conn_close(c);
        } else if (c->deadline_ms < next) {
            next = c->deadline_ms;
        }
    }
    return next == UINT64_MAX ? -1 : (int)(next - now);
}

static void *run(void *arg)
{
    admin_server_t *s = arg;
    struct pollfd *p = calloc(s->o.max_conns + 2, sizeof *p);

    while (p != NULL) {
        int timeout = expire(s);
        p[0] = (struct pollfd){.fd = s->stop[0], .events = POLLIN};
        p[1] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
        for (unsigned i = 0; i < s->o.max_conns; i++)
            p[i + 2] = (struct pollfd){.fd = s->conns[i].fd, .events = POLLIN};
        if (poll(p, s->o.max_conns + 2, timeout) < 0 && errno != EINTR)
            break;
        if (p[0].revents != 0)
            break;
        for (unsigned i = 0; i < s->o.max_conns; i++)
            if (s->conns[i].fd >= 0 && (p[i + 2].revents & (POLLIN | POLLERR | POLLHUP)))
                conn_read(s, &s->conns[i]);
        if (p[1].revents & POLLIN)
            conn_accept(s);
    }
    free(p);
    return NULL;
}

/* Binds host:port. SVC_EINVAL for a bad address, SVC_EUNAVAIL if taken. */
static svc_err_t bind_listen(admin_server_t *s, char errbuf[static SVC_ERRBUF_LEN])
{
    char host[256];
    const char *colon = strrchr(s->o.listen, ':');
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *ai = NULL;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int one = 1, rc;

    if (colon == NULL || colon == s->o.listen || (size_t)(colon - s->o.listen) >= sizeof host) {
        svc_errbuf_set(errbuf, "admin listen address '%s' is not host:port", s->o.listen);
        return SVC_EINVAL;
    }
    snprintf(host, sizeof host, "%.*s", (int)(colon - s->o.listen), s->o.listen);
    if ((rc = getaddrinfo(host, colon + 1, &hints, &ai)) != 0) {
        svc_errbuf_set(errbuf, "admin listen address '%s': %s", s->o.listen, gai_strerror(rc));
        return SVC_EINVAL;
    }
    s->lfd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (s->lfd < 0 || setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(s->lfd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(s->lfd, 64) != 0 ||
        getsockname(s->lfd, (struct sockaddr *)&ss, &sl) != 0) {
        svc_errbuf_set(errbuf, "admin listen %s: %s", s->o.listen, strerror(errno));
        freeaddrinfo(ai);
        return SVC_EUNAVAIL;
    }
    freeaddrinfo(ai);
    s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                             : ((struct sockaddr_in *)&ss)->sin_port);
    (void)fcntl(s->lfd, F_SETFD, FD_CLOEXEC);
    /* Non-blocking, so an accept after a client gave up cannot hang. */
    (void)fcntl(s->lfd, F_SETFL, O_NONBLOCK);
    return SVC_OK;
}

static svc_err_t check_opts(const admin_opts_t *o, char errbuf[static SVC_ERRBUF_LEN])
{
    if (o->listen == NULL || o->max_request_bytes < 64 || o->max_conns < 1 || o->max_conns > 4096 ||
        o->read_timeout_ms < 1 || o->max_response_bytes < 64) {
        svc_errbuf_set(errbuf, "admin options out of range (listen, max_request_bytes >= 64, "
                               "max_conns 1..4096, read_timeout_ms >= 1, "
                               "max_response_bytes >= 64)");
        return SVC_EINVAL;
    }
    return SVC_OK;
}

static svc_err_t alloc_conns(admin_server_t *s)
{
    if ((s->conns = calloc(s->o.max_conns, sizeof *s->conns)) == NULL)
        return SVC_ENOMEM;
    for (unsigned i = 0; i < s->o.max_conns; i++) {
        s->conns[i].fd = -1;
        if ((s->conns[i].buf = malloc(s->o.max_request_bytes + 1)) == NULL)
            return SVC_ENOMEM;
    }
    return SVC_OK;
}

svc_err_t admin_server_new(const admin_opts_t *o, admin_server_t **out,
                           char errbuf[static SVC_ERRBUF_LEN])
{
    admin_server_t *s = NULL;
    svc_err_t err = check_opts(o, errbuf);

    *out = NULL;
    if (err == SVC_OK && strcmp(o->listen, "none") == 0)
        return SVC_OK;
    if (err != SVC_OK)
        return err;
    if ((s = calloc(1, sizeof *s)) == NULL)
        return SVC_ENOMEM;
    s->o = *o;
    s->lfd = s->stop[0] = s->stop[1] = -1;
    s->o.listen = strdup(o->listen);
    err = s->o.listen == NULL || alloc_conns(s) != SVC_OK ? SVC_ENOMEM : SVC_OK;
    if (err == SVC_OK)
        err = bind_listen(s, errbuf);
    if (err == SVC_OK && pipe(s->stop) != 0)
        err = SVC_EUNAVAIL;
    if (err == SVC_OK && pthread_create(&s->thread, NULL, run, s) != 0)
        err = SVC_EUNAVAIL;
    if (err != SVC_OK) {
        if (err != SVC_EINVAL && errbuf != NULL && errbuf[0] == '\0')
            svc_errbuf_set(errbuf, "admin server: %s", svc_strerror(err));
        close(s->stop[0]);
        close(s->stop[1]);
        s->stop[0] = s->stop[1] = -1; /* no thread to stop */
        admin_server_free(s);
        return err;
    }
    svc_log_info(o->log_module != NULL ? o->log_module : "admin",
                 "admin port bound to %s (port %d): /healthz /readyz /metrics", o->listen, s->port);
    *out = s;
    return SVC_OK;
}

int admin_server_port(const admin_server_t *s)
{
    return s->port;
}

svc_err_t admin_server_start(const char *listen, admin_metrics_fn metrics, admin_ready_fn ready,
                             void *ctx, admin_server_t **out, char errbuf[static SVC_ERRBUF_LEN])
{
    admin_opts_t o;

    admin_opts_init(&o);
    o.listen = listen;
    o.metrics = metrics;
    o.ready = ready;
    o.ctx = ctx;
    return admin_server_new(&o, out, errbuf);
}

void admin_server_free(admin_server_t *s)
{
    if (s == NULL)
        return;
    if (s->stop[1] >= 0) {
        char b = 1;
        while (write(s->stop[1], &b, 1) < 0 && errno == EINTR)
            ;
        pthread_join(s->thread, NULL);
        close(s->stop[0]);
        close(s->stop[1]);
    }
    for (unsigned i = 0; s->conns != NULL && i < s->o.max_conns; i++) {
        if (s->conns[i].fd >= 0)
            close(s->conns[i].fd);
        free(s->conns[i].buf);
    }
    free(s->conns);
    if (s->lfd >= 0)
        close(s->lfd);
    free((char *)s->o.listen);
    free(s);
}
