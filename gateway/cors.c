/* SPDX-License-Identifier: Apache-2.0 */
/* cors.c - allowed origins and the CORS headers (see cors.h). */
#include <string.h>

#include <h2o.h>

#include "access.h"
#include "cors.h"
#include "headers.h"
#include "http.h"
#include "routes.h"

#define ORIGIN_MAX 255

static bool no_origins(const char *spec)
{
    return spec[0] == '\0' || strcmp(spec, "none") == 0;
}

static bool host_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-';
}

/* "scheme://host[:port]" of len bytes. */
static bool origin_ok(const char *o, size_t len)
{
    size_t i, start;

    if (len > 7 && strncmp(o, "http://", 7) == 0)
        start = 7;
    else if (len > 8 && strncmp(o, "https://", 8) == 0)
        start = 8;
    else
        return false;
    i = start;
    if (o[i] == '[') {
        while (i < len && o[i] != ']')
            i++;
        if (i == len || strspn(o + start + 1, "0123456789abcdefABCDEF:.") != i - start - 1)
            return false;
        i++;
    } else {
        while (i < len && host_char(o[i]))
            i++;
        if (i == start)
            return false;
    }
    if (i < len && o[i] == ':') {
        size_t digits = strspn(o + i + 1, "0123456789");
        if (digits == 0 || digits > 5 || i + 1 + digits != len)
            return false;
        i = len;
    }
    return i == len && len <= ORIGIN_MAX;
}

svc_err_t gw_cors_check(const char *spec, char errbuf[static SVC_ERRBUF_LEN])
{
    const char *e = spec;

    if (no_origins(spec))
        return SVC_OK;
    for (;;) {
        size_t len = strcspn(e, ",");
        if (!origin_ok(e, len)) {
            svc_errbuf_set(errbuf,
                           "GATEWAY_CORS_ORIGINS: \"%.*s\" is not an origin "
                           "(http:// or https://, a host, an optional :port, nothing more)",
                           (int)(len > 100 ? 100 : len), e);
            return SVC_EINVAL;
        }
        if (e[len] == '\0')
            return SVC_OK;
        e += len + 1;
    }
}

bool gw_cors_enabled(const char *spec)
{
    return !no_origins(spec);
}

bool gw_cors_allowed(const char *spec, const char *origin, size_t len)
{
    const char *e = spec;

    if (no_origins(spec) || len == 0)
        return false;
    for (;;) {
        size_t n = strcspn(e, ",");
        if (n == len && memcmp(e, origin, len) == 0)
            return true;
        if (e[n] == '\0')
            return false;
        e += n + 1;
    }
}

/* 204 with the path's methods; false when no route has the path (the
 * OPTIONS then goes on to its 404). */
static bool answer_preflight(h2o_req_t *req, const gw_access_t *e)
{
    gw_match_t m;
    char methods[64];
    size_t n;

    if (gw_route_match(gw_routes, gw_n_routes, "OPTIONS", 7, e->path, e->path_len, &m) !=
        GW_MATCH_WRONG_METHOD)
        return false;
    n = gw_route_allow_text(m.allow, methods, sizeof methods);
    gw_http_add_header(req, "access-control-allow-methods", "Access-Control-Allow-Methods", methods,
                       n < sizeof methods ? n : sizeof methods - 1);
    gw_http_add_header(req, "access-control-allow-headers", "Access-Control-Allow-Headers",
                       H2O_STRLIT(GW_CORS_ALLOW_HEADERS));
    gw_http_add_header(req, "access-control-max-age", "Access-Control-Max-Age",
                       H2O_STRLIT(GW_CORS_MAX_AGE_S));
    gw_access_end(e, 204);
    req->res.status = 204;
    req->res.reason = gw_http_reason(204);
    req->res.content_length = 0;
    h2o_send_inline(req, "", 0);
    return true;
}

bool gw_cors_handle(h2o_req_t *req, const gw_access_t *e, const char *spec)
{
    const h2o_header_t *origin;

    if (!gw_cors_enabled(spec))
        return false;
    gw_http_add_header(req, "vary", "Vary", H2O_STRLIT("Origin"));
    origin = gw_find_header(req, H2O_STRLIT("origin"));
    if (origin == NULL || !gw_cors_allowed(spec, origin->value.base, origin->value.len))
        return false;
    gw_http_add_header(req, "access-control-allow-origin", "Access-Control-Allow-Origin",
                       origin->value.base, origin->value.len);
    if (h2o_memis(req->method.base, req->method.len, H2O_STRLIT("OPTIONS")) &&
        gw_find_header(req, H2O_STRLIT("access-control-request-method")) != NULL)
        return answer_preflight(req, e);
    gw_http_add_header(req, "access-control-expose-headers", "Access-Control-Expose-Headers",
                       H2O_STRLIT(GW_CORS_EXPOSE_HEADERS));
    return false;
}
