/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cors.h - CORS for browser clients (docs/gateway.md, "Security", "CORS"),
 * from GATEWAY_CORS_ORIGINS: the origins whose pages may call the API.
 *
 * None by default: no response carries a CORS header, and a browser keeps
 * every other origin's page from reading the answers. With a list, a
 * request whose Origin is on it (byte for byte: browsers send it in lower
 * case, without a path) is answered with
 *   Access-Control-Allow-Origin: <that origin>
 *   Access-Control-Expose-Headers: X-Request-Id, Retry-After
 * and a preflight (OPTIONS with Access-Control-Request-Method) of a known
 * path gets 204 with
 *   Access-Control-Allow-Methods: <the path's methods, as Allow lists them>
 *   Access-Control-Allow-Headers: GW_CORS_ALLOW_HEADERS
 *   Access-Control-Max-Age: GW_CORS_MAX_AGE_S
 * Every response of a gateway with a list says Vary: Origin, since what it
 * carries depends on it. An origin not on the list gets no CORS header at
 * all (its preflight is an OPTIONS like any other: 405). No credentials
 * mode: a token goes in Authorization, which the list allows.
 */
#ifndef GW_CORS_H
#define GW_CORS_H

#include <stdbool.h>
#include <stddef.h>

#include "svc/core.h"

/* The request headers the gateway reads that a page may send (besides the
 * ones CORS always allows): Grpc-Metadata-* cannot be listed by prefix. */
#define GW_CORS_ALLOW_HEADERS                                                                      \
    "Content-Type, Authorization, Idempotency-Key, Grpc-Timeout, X-Request-Id"
#define GW_CORS_EXPOSE_HEADERS                                                                     \
    "X-Request-Id, Retry-After, WWW-Authenticate, RateLimit, RateLimit-Policy"
#define GW_CORS_MAX_AGE_S "600" /* seconds a browser may keep a preflight's answer */

/* GATEWAY_CORS_ORIGINS: "" or "none" (no CORS), or comma-separated origins
 * "scheme://host[:port]", scheme http or https, host of letters, digits,
 * '.', '-' (or a bracketed IPv6 address), no path, no '*'. SVC_EINVAL with
 * the entry in errbuf. Pure. */
svc_err_t gw_cors_check(const char *spec, char errbuf[static SVC_ERRBUF_LEN]);

/* Whether spec (checked) lists any origin. Pure. */
bool gw_cors_enabled(const char *spec);

/* Whether origin (len bytes, borrowed) is on spec's list. Pure. */
bool gw_cors_allowed(const char *spec, const char *origin, size_t len);

struct st_h2o_req_t;
struct gw_access;

/*
 * On the loop thread, before routing: adds the CORS headers a request from
 * an allowed origin gets, and answers its preflight. Returns true when the
 * request has been answered (a preflight: 204), false when it goes on.
 */
bool gw_cors_handle(struct st_h2o_req_t *req, const struct gw_access *e, const char *spec);

#endif
