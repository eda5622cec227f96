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

/* A token of RFC 9110 (method names): visible ASCII but no separators. */
static bool is_tchar(char c)
{
    return c > 0x20 && c < 0x7f && strchr("\"(),/:;<=>?@[\\]{}", c) == NULL;
}

/* Parses "METHOD SP /target SP HTTP/1.x" (line without CRLF). */
static int parse_line(const char *line, size_t n, admin__req_t *req, const char **target,
                      size_t *tlen)
{
    const char *sp1 = memchr(line, ' ', n), *sp2, *end = line + n;

    if (sp1 == NULL || sp1 == line)
        return 400;
    for (const char *p = line; p < sp1; p++)
        if (!is_tchar(*p))
            return 400;
    sp2 = memchr(sp1 + 1, ' ', (size_t)(end - sp1 - 1));
    if (sp2 == NULL || sp2 == sp1 + 1 || sp1[1] != '/')
        return 400;
    if (end - sp2 - 1 != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 ||
        (sp2[8] != '0' && sp2[8] != '1'))
        return 400;
    for (const char *p = sp1 + 1; p < sp2; p++)
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
            return 400;
    req->method = line;
    req->method_len = (size_t)(sp1 - line);
    *target = sp1 + 1;
    *tlen = (size_t)(sp2 - sp1 - 1);
    return 0;
}

static bool method_is(const admin__req_t *req, const char *m)
{
    return req->method_len == strlen(m) && memcmp(req->method, m, req->method_len) == 0;
}

/* 400 for a header line without a colon or a malformed Content-Length, 413
 * for Transfer-Encoding (never accepted). *clen gets the Content-Length (0
 * without one). Names compare case-insensitively. */
static int check_headers(const char *p, const char *end, size_t max, size_t *clen)
{
    *clen = 0;
    while (p < end) {
        const char *eol = strstr(p, "\r\n"), *colon;
        size_t n = (size_t)(eol - p);

        colon = memchr(p, ':', n);
        if (colon == NULL || colon == p)
            return 400;
        if ((size_t)(colon - p) == 17 && strncasecmp(p, "transfer-encoding", 17) == 0)
            return 413;
        if ((size_t)(colon - p) == 14 && strncasecmp(p, "content-length", 14) == 0) {
            char *e;
            unsigned long long v = strtoull(colon + 1, &e, 10);
            while (*e == ' ' || *e == '\t')
                e++;
            if (e != eol)
                return 400;
            *clen = v > max ? max + 1 : (size_t)v;
        }
        p = eol + 2;
    }
    return 0;
}

/* Splits target into path and query (a scraper's query string changes
 * nothing for the fixed routes). */
static void split_target(const char *target, size_t tlen, admin__req_t *req)
{
    const char *q = memchr(target, '?', tlen);

    req->path = target;
    req->path_len = q != NULL ? (size_t)(q - target) : tlen;
    req->query = q != NULL ? q + 1 : NULL;
    req->query_len = q != NULL ? tlen - req->path_len - 1 : 0;
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
    const char *eol, *end, *target = NULL;
    size_t tlen = 0, clen = 0, head;
    int st;

    memset(req, 0, sizeof *req);
    if (memchr(buf, '\0', len) != NULL) /* and strstr cannot skip one */
        return 400;
    end = strstr(buf, "\r\n\r\n");
    if (end == NULL)
        return len >= max ? 431 : 0;
    head = (size_t)(end - buf) + 4;
    if (head > max)
        return 431;
    eol = strstr(buf, "\r\n");
    st = parse_line(buf, (size_t)(eol - buf), req, &target, &tlen);
    if (st == 0)
        st = check_headers(eol + 2, end + 2, max, &clen);
    if (st != 0)
        return st;
    split_target(target, tlen, req);
    if (debug && is_debug_path(req))
        return debug_request(end + 4, len - head, head, max, clen, req);
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
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return "Internal Server Error";
    }
}

void admin__response_with(admin_buf_t *out, int status, const char *ctype, const char *headers,
                          const char *body, size_t body_len)
{
    admin_buf_printf(out,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Cache-Control: no-store\r\n%s%sConnection: close\r\n\r\n",
                     status, reason(status), ctype, body_len,
                     status == 405 ? "Allow: GET\r\n" : "", headers);
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
