/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http.c - the HTTP/1.1 this port understands: a GET of one of three paths,
 * no body. Pure functions over bytes, so the unit tests need no socket.
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

bool admin_ready_one(admin_buf_t *out, const char *name, bool ok, const char *detail)
{
    admin_buf_printf(out, "{\"status\":\"%s\",\"checks\":[{\"name\":", ok ? "ok" : "unavailable");
    admin_buf_json_str(out, name);
    admin_buf_printf(out, ",\"ok\":%s,\"detail\":", ok ? "true" : "false");
    admin_buf_json_str(out, detail != NULL ? detail : "");
    admin_buf_printf(out, "}]}");
    return ok;
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
static int parse_line(const char *line, size_t n, bool *is_get, const char **target, size_t *tlen)
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
    *is_get = sp1 - line == 3 && memcmp(line, "GET", 3) == 0;
    *target = sp1 + 1;
    *tlen = (size_t)(sp2 - sp1 - 1);
    return 0;
}

/* 413 when a header announces a body (a GET here never has one), 400 for a
 * header line without a colon. Names compare case-insensitively. */
static int check_headers(const char *p, const char *end)
{
    while (p < end) {
        const char *eol = strstr(p, "\r\n"), *colon;
        size_t n = (size_t)(eol - p);

        colon = memchr(p, ':', n);
        if (colon == NULL || colon == p)
            return 400;
        if ((size_t)(colon - p) == 17 && strncasecmp(p, "transfer-encoding", 17) == 0)
            return 413;
        if ((size_t)(colon - p) == 14 && strncasecmp(p, "content-length", 14) == 0 &&
            strtoll(colon + 1, NULL, 10) != 0)
            return 413;
        p = eol + 2;
    }
    return 0;
}

static int route_of(const char *target, size_t tlen, admin__route_t *route)
{
    const char *q = memchr(target, '?', tlen);

    if (q != NULL) /* a scraper's query string changes nothing here */
        tlen = (size_t)(q - target);
    for (size_t i = 0; i < SVC_COUNTOF(routes); i++) {
        if (strlen(routes[i].path) == tlen && memcmp(routes[i].path, target, tlen) == 0) {
            *route = routes[i].route;
            return 200;
        }
    }
    return 404;
}

int admin__parse(const char *buf, size_t len, size_t max, admin__route_t *route)
{
    const char *eol, *end, *target = NULL;
    size_t tlen = 0;
    bool is_get = false;
    int st;

    if (memchr(buf, '\0', len) != NULL) /* and strstr cannot skip one */
        return 400;
    end = strstr(buf, "\r\n\r\n");
    if (end == NULL)
        return len >= max ? 431 : 0;
    if ((size_t)(end - buf) + 4 > max)
        return 431;
    eol = strstr(buf, "\r\n");
    st = parse_line(buf, (size_t)(eol - buf), &is_get, &target, &tlen);
    if (st == 0)
        st = check_headers(eol + 2, end + 2);
    if (st == 0 && !is_get)
        st = 405;
    return st != 0 ? st : route_of(target, tlen, route);
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

void admin__response(admin_buf_t *out, int status, const char *ctype, const char *body,
                     size_t body_len)
{
    admin_buf_printf(out,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Cache-Control: no-store\r\n%sConnection: close\r\n\r\n",
                     status, reason(status), ctype, body_len,
                     status == 405 ? "Allow: GET\r\n" : "");
    append(out, body, body_len);
}
