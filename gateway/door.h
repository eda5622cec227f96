/* SPDX-License-Identifier: Apache-2.0 */
/*
 * door.h - the front door's state, made once from the settings: the bearer
 * token check (auth.h) and the rate limiter (ratelimit.h), and each route's
 * rule for guard.h from its row of the table (scopes, rate class).
 *
 * Settings (config.c):
 *   GATEWAY_JWKS_FILE     the issuer's public keys. Empty: no token can be
 *                         verified, so every route that needs one answers
 *                         401 and a request with a token is refused; the
 *                         public reads still work. The gateway says so at
 *                         start. There is no built-in key: a deployment
 *                         names its identity provider's key set.
 *   GATEWAY_JWT_ISSUER, GATEWAY_JWT_AUDIENCE, GATEWAY_JWT_LEEWAY_S,
 *   GATEWAY_JWT_CACHE_ENTRIES
 *   GATEWAY_PUBLIC_READS  on: the table's public routes need no token; off:
 *                         every API route needs a valid one, of any scope
 *   GATEWAY_RATE_LIMITS   "off", or the classes the table's rows name
 *                         ("read", "write"); a class a row names but the
 *                         setting lacks is a start-up error, so that a
 *                         route is never unlimited by a typo.
 *   GATEWAY_RATE_LIMIT_CAPACITY
 *
 * Threads: gw_door_new, gw_door_tick and gw_door_free on the main thread
 * (before the loops start, once a second while they run, after they are
 * joined); gw_door_loop_new/free per loop thread; gw_door_check on a loop
 * thread with that loop's gw_auth_loop_t; gw_door_render on any thread.
 */
#ifndef GW_DOOR_H
#define GW_DOOR_H

#include "config.h"
#include "guard.h"
#include "routes.h"

typedef struct gw_door gw_door_t;

/* rules for routes[0..n), which must outlive the door. *out owned by the
 * caller (gw_door_free). SVC_EINVAL with errbuf (a bad key set file, a bad
 * rate-limit setting, a class no setting names) or SVC_ENOMEM. */
svc_err_t gw_door_new(const gw_config_t *cfg, const gw_route_t *routes, size_t n, gw_door_t **out,
                      char errbuf[static SVC_ERRBUF_LEN]) __attribute__((warn_unused_result));
/* Every loop's gw_auth_loop_t must have been freed. NULL-safe. */
void gw_door_free(gw_door_t *d);

/* Main thread, once a second: reloads the key set when its file changed. */
void gw_door_tick(gw_door_t *d);

/* This loop's token cache: *out NULL (and SVC_OK) without a key set file.
 * Free with gw_auth_loop_free. */
svc_err_t gw_door_loop_new(gw_door_t *d, gw_auth_loop_t **out) __attribute__((warn_unused_result));

/* guard.h's check for routes[route], counted for the metrics. */
void gw_door_check(gw_door_t *d, gw_auth_loop_t *auth, size_t route, const gw_guard_request_t *rq,
                   gw_guard_verdict_t *v);

/*
 * Prometheus text (snprintf semantics, as gw_rl_render; d is a gw_door_t):
 *   gateway_auth_tokens_total{result}    bearer tokens checked: "valid", or
 *                                        why one was refused ("expired", ...)
 *   gateway_auth_refused_total{status}   requests refused 401 / 403
 *   gateway_auth_keyset_generation       bumped by every reload (gauge; 0:
 *                                        no key set file)
 *   gateway_auth_keyset_reload_failures_total
 */
svc_err_t gw_door_render(const void *d, char *buf, size_t cap, size_t *len);
/* The limiter, for gw_rl_render; NULL when GATEWAY_RATE_LIMITS=off. */
const gw_rl_t *gw_door_ratelimit(const gw_door_t *d);

#endif
