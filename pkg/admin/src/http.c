/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http.c - the HTTP/1.1 this port understands: a GET of one of three paths,
 * no body; and, when the service installed a debug handler, GET, POST or PUT
 * of /debug/... with a small Content-Length body. Pure functions over bytes, so the unit tests need no socket.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http1/http1.h"
#include "internal.h"

void admin__buf_init(admin_buf_t *b, size_t max)
{
    memset(b, 0, sizeof *b);
    b->max = max;
}

void admin__buf_dispose(admin_buf_t *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* Makes room for need more bytes plus a NUL, doubling, never past max. */
static bool reserve(admin_buf_t *b, size_t need)
{
    size_t cap = b->cap ? b->cap : 1024;
    char *p;

    if (b->overflow || need > b->max - b->len)
        return false;
    while (cap < b->len + need + 1)
        cap *= 2;
    if (cap == b->cap)
        return true;
    if ((p = realloc(b->data, cap)) == NULL)
        return false;
    b->data = p;
    b->cap = cap;
    return true;
}

static void append(admin_buf_t *b, const char *s, size_t n)
{
    if (!reserve(b, n)) {
        b->overflow = true;
        return;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void admin_buf_printf(admin_buf_t *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->overflow = true;
        return;
    }
    if ((size_t)n < sizeof small) {
        append(b, small, (size_t)n);
        return;
    }
    /* A long line: format again straight into the buffer. */
    if (!reserve(b, (size_t)n)) {
        b->overflow = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void admin_buf_json_str(admin_buf_t *b, const char *s)
{
    append(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            admin_buf_printf(b, "\\%c", *p);
        else if (*p < 0x20)
            admin_buf_printf(b, "\\u%04x", *p);
        else
            append(b, (const char *)p, 1);
    }
    append(b, "\"", 1);
}

bool admin_ready_write(admin_buf_t *out, const admin_check_t *checks, size_t n)
{
    bool ok = true;

    for (size_t i = 0; i < n; i++)
        ok = ok && checks[i].ok;
    admin_buf_printf(out, "{\"status\":\"%s\",\"checks\":[", ok ? "ok" : "unavailable");
    for (size_t i = 0; i < n; i++) {
        admin_buf_printf(out, "%s{\"name\":", i > 0 ? "," : "");
        admin_buf_json_str(out, checks[i].name);
        admin_buf_printf(out, ",\"ok\":%s,\"detail\":", checks[i].ok ? "true" : "false");
        admin_buf_json_str(out, checks[i].detail);
        admin_buf_printf(out, "}");
    }
    admin_buf_printf(out, "]}");
    return ok;
}

bool admin_ready_one(admin_buf_t *out, const char *name, bool ok, const char *detail)
{
    admin_check_t c = {name, ok, ""};

    snprintf(c.detail, sizeof c.detail, "%s", detail != NULL ? detail : "");
    return admin_ready_write(out, &c, 1);
}

void admin_buf_render(admin_buf_t *b, admin_render_fn fn, const void *arg)
{
    size_t need = 0;

    for (int tries = 0; tries < 3; tries++) {
        size_t got = 0;
        (void)fn(arg, NULL, 0, &need);
        if (!reserve(b, need + 64)) { /* a little room for what appears meanwhile */
            b->overflow = true;
            return;
        }
        if (fn(arg, b->data + b->len, b->cap - b->len, &got) == SVC_OK) {
            b->len += got;
            return;
        }
        b->data[b->len] = '\0';
    }
    b->overflow = true;
}

/* ---- requests ----------------------------------------------------------- */

static const struct {
    const char *path;
    admin__route_t route;
} routes[] = {
    {"/healthz", ADMIN__HEALTHZ},
    {"/readyz", ADMIN__READYZ},
    {"/metrics", ADMIN__METRICS},
};

static bool method_is(const admin__req_t *req, const char *m)
{
    return req->method_len == strlen(m) && memcmp(req->method, m, req->method_len) == 0;
}

static int route_of(admin__req_t *req)
{
    for (size_t i = 0; i < SVC_COUNTOF(routes); i++) {
        if (strlen(routes[i].path) == req->path_len &&
            memcmp(routes[i].path, req->path, req->path_len) == 0) {
            req->route = routes[i].route;
            return 200;
        }
    }
    return 404;
}

static bool is_debug_path(const admin__req_t *req)
{
    return (req->path_len == 6 && memcmp(req->path, "/debug", 6) == 0) ||
           (req->path_len > 6 && memcmp(req->path, "/debug/", 7) == 0);
}

/* A /debug request: GET (no body), POST or PUT (a body of clen bytes that
 * must fit, with the head, in max). */
static int debug_request(const char *body, size_t have, size_t head, size_t max, size_t clen,
                         admin__req_t *req)
{
    if (!method_is(req, "GET") && !method_is(req, "POST") && !method_is(req, "PUT"))
        return 405;
    if (clen > 0 && method_is(req, "GET"))
        return 413;
    if (clen > max || head + clen > max)
        return 413;
    if (have < clen)
        return 0;
    req->route = ADMIN__DEBUG;
    req->body = body;
    req->body_len = clen;
    return 200;
}

int admin__parse_req(const char *buf, size_t len, size_t max, bool debug, admin__req_t *req)
{
    h1_request_t h;
    size_t clen;

    memset(req, 0, sizeof *req);
    switch (h1_parse_request(buf, len, max, &h)) {
    case H1_INCOMPLETE:
        return 0;
    case H1_OK:
        break;
    case H1_TOO_LARGE:
        return 431;
    default:
        return 400;
    }
    if (h.transfer_encoding) /* no chunked bodies here */
        return 413;
    clen = h.content_length > max ? max + 1 : (size_t)h.content_length;
    req->method = h.method.p;
    req->method_len = h.method.len;
    req->path = h.path.p;
    req->path_len = h.path.len;
    req->query = h.query.p;
    req->query_len = h.query.len;
    if (debug && is_debug_path(req))
        return debug_request(buf + h.head_len, len - h.head_len, h.head_len, max, clen, req);
    if (clen > 0) /* a GET here never has a body */
        return 413;
    if (!method_is(req, "GET"))
        return 405;
    return route_of(req);
}

int admin__parse(const char *buf, size_t len, size_t max, admin__route_t *route)
{
    admin__req_t req;
    int st = admin__parse_req(buf, len, max, false, &req);

    if (st == 200)
        *route = req.route;
    return st;
}

/* ---- responses ---------------------------------------------------------- */

static const char *reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 413:
        return "Content Too Large";
    case 431:
        return "Request Header Fields Too Large";
    case 503:
        return "Service Unavailable";
    default:
        return "Internal Server Error";
    }
}

void admin__response_with(admin_buf_t *out, int status, const char *ctype, const char *headers,
                          const char *body, size_t body_len)
{
    admin_buf_printf(out,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Cache-Control: no-store\r\n%s%sConnection: close\r\n\r\n",
                     status, reason(status), ctype, body_len, status == 405 ? "Allow: GET\r\n" : "",
                     headers);
    append(out, body, body_len);
}

void admin__response(admin_buf_t *out, int status, const char *ctype, const char *body,
                     size_t body_len)
{
    admin__response_with(out, status, ctype, "", body, body_len);
}

void admin_buf_allow_any_origin(admin_buf_t *b)
{
    b->any_origin = true;
}

void admin_buf_set_content_type(admin_buf_t *b, const char *ctype)
{
    b->ctype = ctype;
}
