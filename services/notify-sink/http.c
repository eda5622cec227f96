/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http.c - the sink's HTTP/1.1 server on poll(2). The contract (and why it
 * is not h2o) is in http.h; comments here say why, not what.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http.h"

#define TICK_MS    100 /* poll timeout: idle checks and the go-away reopen */
#define READ_CHUNK 16384

typedef struct conn {
    int fd; /* -1: free slot */
    char *in;
    size_t in_len, in_cap;
    char *out;
    size_t out_len, out_off;
    bool hung;        /* a request we never answer: ignore the rest */
    bool close_after; /* close once out is written */
    uint64_t last_ms;
} conn_t;

struct nsk_http {
    nsk_http_opts_t o;
    char host[256];
    int port;
    int lfd;
    conn_t *conns;
    struct pollfd *pfds;
    bool away_pending;
    uint32_t away_ms;
    uint64_t away_until_ms;
};

const char *nsk_req_header(const nsk_req_t *r, const char *name)
{
    for (size_t i = 0; i < r->n_headers; i++)
        if (strcasecmp(r->names[i], name) == 0)
            return r->values[i];
    return NULL;
}

/* ---- sockets ------------------------------------------------------------- */

static svc_err_t listen_on(nsk_http_t *h, int port, char errbuf[static SVC_ERRBUF_LEN])
{
    struct addrinfo hints = {0}, *ai = NULL;
    char service[16];
    int one = 1, fd = -1, rc;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;

    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(service, sizeof service, "%d", port);
    rc = getaddrinfo(h->host, service, &hints, &ai);
    if (rc != 0) {
        svc_errbuf_set(errbuf, "listen %s:%d: %s", h->host, port, gai_strerror(rc));
        return SVC_EINVAL;
    }
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
        svc_errbuf_set(errbuf, "listen %s:%d: %s", h->host, port, strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return SVC_EUNAVAIL;
    }
    freeaddrinfo(ai);
    h->lfd = fd;
    h->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                             : ((struct sockaddr_in *)&ss)->sin_port);
    return SVC_OK;
}

static void conn_close(conn_t *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->in);
    free(c->out);
    *c = (conn_t){.fd = -1};
}

static void accept_all(nsk_http_t *h, uint64_t now)
{
    for (;;) {
        int fd = accept4(h->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1;
        conn_t *slot = NULL;

        if (fd < 0)
            return;
        for (unsigned i = 0; i < h->o.max_conns && slot == NULL; i++)
            if (h->conns[i].fd < 0)
                slot = &h->conns[i];
        if (slot == NULL) {
            close(fd); /* full: the bound of http.h */
            continue;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        *slot = (conn_t){.fd = fd, .last_ms = now};
    }
}

/* ---- responses ------------------------------------------------------------- */

static const char *status_text(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 202:
        return "Accepted";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 413:
        return "Content Too Large";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return "Status";
    }
}

static void queue_response(conn_t *c, const nsk_resp_t *r)
{
    char head[512];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s%s\r\n",
                     r->status, status_text(r->status), r->ctype != NULL ? r->ctype : "text/plain",
                     r->body_len, r->extra, r->extra[0] != '\0' ? "\r\n" : "",
                     c->close_after ? "Connection: close\r\n" : "");
    size_t need = c->out_len + (size_t)n + r->body_len;
    char *p = realloc(c->out, need);

    if (p == NULL) {
        c->close_after = true; /* out of memory: the client sees a reset */
        return;
    }
    c->out = p;
    memcpy(c->out + c->out_len, head, (size_t)n);
    if (r->body_len > 0)
        memcpy(c->out + c->out_len + (size_t)n, r->body, r->body_len);
    c->out_len = need;
}

/* Answers status and closes after it; false: no request follows. */
static bool respond_error(conn_t *c, int status)
{
    nsk_resp_t r = {.status = status};

    c->close_after = true;
    queue_response(c, &r);
    return false;
}

/* Returns false when the connection is to be closed. */
static bool flush(conn_t *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
        c->out_off += (size_t)n;
    }
    c->out_off = c->out_len = 0;
    return !c->close_after;
}

/* ---- parsing --------------------------------------------------------------- */

/* Ends a slice of the connection's buffer with a NUL, in place: each slice
 * h1_parse_request returns is followed by a separator (space, '?', ':',
 * CR), which the handler never needs. */
static const char *terminate(conn_t *c, h1_str_t s)
{
    char *p = c->in + (s.p - c->in);

    p[s.len] = '\0';
    return p;
}

/* The parsed head as the handler sees it: NUL-terminated strings. */
static void to_request(conn_t *c, const h1_request_t *h, nsk_req_t *r)
{
    r->method = terminate(c, h->method);
    r->path = terminate(c, h->path);
    r->query = h->query.p != NULL ? terminate(c, h->query) : "";
    r->version = h->minor_version == 1 ? "HTTP/1.1" : "HTTP/1.0";
    r->n_headers = h->n_headers;
    for (size_t i = 0; i < h->n_headers; i++) {
        r->names[i] = terminate(c, h->headers[i].name);
        r->values[i] = terminate(c, h->headers[i].value);
    }
    r->body = c->in + h->head_len;
    r->body_len = (size_t)h->content_length;
}

/* Handles the first request of c->in if it is complete; true when another
 * may follow. */
static bool serve_one(nsk_http_t *h, conn_t *c)
{
    h1_request_t head;
    size_t total;
    nsk_req_t r;
    nsk_resp_t resp = {0};

    switch (h1_parse_request(c->in, c->in_len, NSK_HTTP_MAX_HEAD, &head)) {
    case H1_INCOMPLETE:
        return false;
    case H1_OK:
        break;
    case H1_TOO_LARGE:
        return respond_error(c, 431);
    default:
        return respond_error(c, 400);
    }
    if (head.transfer_encoding)
        return respond_error(c, 501);
    if (head.content_length > h->o.max_body)
        return respond_error(c, 413);
    total = head.head_len + (size_t)head.content_length;
    if (c->in_len < total)
        return false;
    to_request(c, &head, &r);
    c->close_after = !head.keep_alive;
    h->o.handler(h->o.ctx, &r, &resp);
    if (resp.status == 0) {
        c->hung = true; /* never answered: the client's timeout is what ends it */
        c->in_len = 0;
        return false;
    }
    queue_response(c, &resp);
    memmove(c->in, c->in + total, c->in_len - total);
    c->in_len -= total;
    return !c->close_after;
}

/* Returns false when the connection is to be closed. */
static bool read_some(nsk_http_t *h, conn_t *c)
{
    size_t max = NSK_HTTP_MAX_HEAD + h->o.max_body + 4;
    ssize_t n;

    if (c->in_cap - c->in_len < READ_CHUNK && c->in_cap < max) {
        size_t cap = c->in_cap == 0 ? READ_CHUNK : c->in_cap * 2;
        char *p = realloc(c->in, cap > max ? max : cap);
        if (p == NULL)
            return false;
        c->in = p;
        c->in_cap = cap > max ? max : cap;
    }
    if (c->in_len + 1 >= c->in_cap)
        return !c->hung; /* full: only a hung connection may sit on it */
    n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len - 1, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        return false;
    if (n < 0)
        return true;
    if (c->hung) {
        c->in_len = 0; /* nothing on a hung connection is answered */
        return true;
    }
    c->in_len += (size_t)n;
    c->in[c->in_len] = '\0';
    while (serve_one(h, c))
        ;
    return true;
}

/* ---- the loop ---------------------------------------------------------------- */

static void go_away_now(nsk_http_t *h, uint64_t now)
{
    for (unsigned i = 0; i < h->o.max_conns; i++) {
        if (h->conns[i].fd >= 0)
            (void)flush(&h->conns[i]); /* the control request's answer */
        conn_close(&h->conns[i]);
    }
    if (h->lfd >= 0)
        close(h->lfd);
    h->lfd = -1;
    h->away_pending = false;
    h->away_until_ms = now + h->away_ms;
}

static void tick(nsk_http_t *h, uint64_t now)
{
    if (h->lfd < 0 && now >= h->away_until_ms) {
        char errbuf[SVC_ERRBUF_LEN];
        /* The port may still be held for a moment; try again next tick. */
        if (listen_on(h, h->port, errbuf) == SVC_OK)
            svc_log_info("notify-sink", "listening again on port %d", h->port);
    }
    for (unsigned i = 0; i < h->o.max_conns; i++) {
        conn_t *c = &h->conns[i];
        if (c->fd >= 0 && now - c->last_ms > (uint64_t)h->o.idle_timeout_ms)
            conn_close(c);
    }
}

int nsk_http_run(nsk_http_t *h, int stop_fd)
{
    for (;;) {
        nfds_t n = 0;
        uint64_t now;

        h->pfds[n++] = (struct pollfd){.fd = stop_fd, .events = POLLIN};
        h->pfds[n++] = (struct pollfd){.fd = h->lfd, .events = POLLIN}; /* -1: ignored */
        for (unsigned i = 0; i < h->o.max_conns; i++) {
            conn_t *c = &h->conns[i];
            short ev = (short)(POLLIN | (c->out_len > 0 ? POLLOUT : 0));
            h->pfds[n++] = (struct pollfd){.fd = c->fd, .events = ev};
        }
        if (poll(h->pfds, n, TICK_MS) < 0 && errno != EINTR)
            return 1;
        if (h->pfds[0].revents != 0)
            return 0;
        now = svc_now_ms();
        if (h->lfd >= 0 && (h->pfds[1].revents & POLLIN))
            accept_all(h, now);
        for (unsigned i = 0; i < h->o.max_conns; i++) {
            conn_t *c = &h->conns[i];
            short re = h->pfds[2 + i].revents;
            bool keep = true;

            if (c->fd < 0 || re == 0 || h->pfds[2 + i].fd != c->fd)
                continue;
            c->last_ms = now;
            if (re & (POLLIN | POLLHUP | POLLERR))
                keep = read_some(h, c);
            if (keep && c->out_len > 0)
                keep = flush(c);
            if (!keep)
                conn_close(c);
        }
        if (h->away_pending)
            go_away_now(h, now);
        tick(h, now);
    }
}

void nsk_http_go_away(nsk_http_t *h, uint32_t ms)
{
    h->away_pending = true;
    h->away_ms = ms;
}

/* ---- lifecycle ------------------------------------------------------------------ */

static svc_err_t split_listen(const char *listen, char host[256], int *port,
                              char errbuf[static SVC_ERRBUF_LEN])
{
    const char *colon = strrchr(listen, ':');
    char *stop;
    long p;

    if (colon == NULL || colon == listen || (size_t)(colon - listen) >= 256) {
        svc_errbuf_set(errbuf, "listen %s: host:port expected", listen);
        return SVC_EINVAL;
    }
    p = strtol(colon + 1, &stop, 10);
    if (*stop != '\0' || stop == colon + 1 || p < 0 || p > 65535) {
        svc_errbuf_set(errbuf, "listen %s: bad port", listen);
        return SVC_EINVAL;
    }
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = '\0';
    *port = (int)p;
    return SVC_OK;
}

svc_err_t nsk_http_new(const nsk_http_opts_t *o, nsk_http_t **out,
                       char errbuf[static SVC_ERRBUF_LEN])
{
    nsk_http_t *h;
    svc_err_t err;
    int port;

    if (o->handler == NULL || o->max_conns == 0 || o->idle_timeout_ms <= 0) {
        svc_errbuf_set(errbuf, "http: handler, max_conns and idle_timeout_ms are required");
        return SVC_EINVAL;
    }
    h = calloc(1, sizeof *h);
    if (h == NULL)
        return SVC_ENOMEM;
    h->o = *o;
    h->lfd = -1;
    h->conns = calloc(o->max_conns, sizeof *h->conns);
    h->pfds = calloc(o->max_conns + 2, sizeof *h->pfds);
    if (h->conns == NULL || h->pfds == NULL) {
        nsk_http_free(h);
        return SVC_ENOMEM;
    }
    for (unsigned i = 0; i < o->max_conns; i++)
        h->conns[i].fd = -1;
    err = split_listen(o->listen, h->host, &port, errbuf);
    if (err == SVC_OK)
        err = listen_on(h, port, errbuf);
    if (err != SVC_OK) {
        nsk_http_free(h);
        return err;
    }
    *out = h;
    return SVC_OK;
}

void nsk_http_free(nsk_http_t *h)
{
    if (h == NULL)
        return;
    for (unsigned i = 0; h->conns != NULL && i < h->o.max_conns; i++)
        conn_close(&h->conns[i]);
    if (h->lfd >= 0)
        close(h->lfd);
    free(h->conns);
    free(h->pfds);
    free(h);
}

int nsk_http_port(const nsk_http_t *h)
{
    return h->port;
}
