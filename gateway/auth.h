/* SPDX-License-Identifier: Apache-2.0 */
/*
 * auth.h - the gateway's bearer-token check as one object: its settings,
 * the current key set (reloaded from its file without a restart) and, per
 * loop thread, a cache of verified tokens.
 *
 * Threads and ownership:
 *  - gw_auth_t is created by the main thread before the loop threads start
 *    and freed after they are joined. Only the main thread calls
 *    gw_auth_reload_if_changed (once a second, from its tick).
 *  - Each loop thread creates its own gw_auth_loop_t (gw_auth_loop_new, on
 *    that thread or before it starts), and only that thread uses it. The
 *    loop holds a reference to one key set and its own cache, so a request
 *    takes no lock and touches no cache line another thread writes, except
 *    one atomic load of the holder's generation.
 *  - A reload swaps the holder's set under a mutex and bumps the
 *    generation. A loop that sees a new generation on its next request takes
 *    the mutex once, retains the new set, drops its old one (the last
 *    holder of a set frees it, on whichever thread) and empties its cache,
 *    so no token is ever answered from a cache filled under a retired key.
 *
 * Why a cache per loop and not one shared: the gateway has a few loop
 * threads (GATEWAY_THREADS) and a client's keep-alive connection stays on
 * one, so a reused token is verified at most once per loop; a shared cache
 * would need a lock or sharded locks on every request, and its lines would
 * bounce between cores at every hit's LRU update.
 */
#ifndef GW_AUTH_H
#define GW_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jwks.h"
#include "jwt.h"
#include "jwt_cache.h"
#include "svc/core.h"

/* Verified tokens each loop keeps (GATEWAY_JWT_CACHE_ENTRIES); 0: no cache.
 * An entry is about 160 bytes: 2048 is 320 KiB per loop thread. */
#define GW_AUTH_DEFAULT_CACHE_ENTRIES 2048u

typedef struct gw_auth_opts {
    const char *jwks_file; /* required: GATEWAY_JWKS_FILE; copied */
    const char *issuer;    /* required: GATEWAY_JWT_ISSUER; copied */
    const char *audience;  /* required: GATEWAY_JWT_AUDIENCE; copied */
    uint32_t leeway_s;     /* GW_JWT_DEFAULT_LEEWAY_S (GATEWAY_JWT_LEEWAY_S) */
    size_t cache_entries;  /* GW_AUTH_DEFAULT_CACHE_ENTRIES */
    /* Wall clock (ns since the Unix epoch); NULL: CLOCK_REALTIME. Borrowed:
     * must outlive the holder. Tests pass a fake one. */
    const svc_clock_t *wall_clock;
} gw_auth_opts_t;

typedef struct gw_auth gw_auth_t;
typedef struct gw_auth_loop gw_auth_loop_t;

void gw_auth_opts_init(gw_auth_opts_t *o);

/* Loads the key set from o->jwks_file. *out owned by caller (gw_auth_free);
 * SVC_EINVAL with the reason in errbuf (a bad option, a bad file) or
 * SVC_ENOMEM. A gateway configured with a JWKS file that cannot be read
 * does not start. */
svc_err_t gw_auth_new(const gw_auth_opts_t *o, gw_auth_t **out, char errbuf[static SVC_ERRBUF_LEN])
    __attribute__((warn_unused_result));
/* Every gw_auth_loop_t must have been freed. NULL-safe. */
void gw_auth_free(gw_auth_t *a);

/*
 * Main thread only. Looks at the file (stat: device, inode, size, mtime);
 * when it differs from the one last loaded, loads it and makes it current.
 * Returns 1 when a new set is current, 0 when nothing changed, -1 when the
 * new file is bad: the previous set stays current and one error line is
 * logged (mod=gateway.auth), once per version of the file, so a file left
 * bad is not logged every second.
 */
int gw_auth_reload_if_changed(gw_auth_t *a);
/* Bumped by every reload that made a new set current (starts at 1). Any
 * thread (an atomic). */
uint64_t gw_auth_generation(const gw_auth_t *a);
/* The opts a holder verifies with (issuer, audience, leeway, clock). */
const gw_jwt_opts_t *gw_auth_jwt_opts(const gw_auth_t *a);

/* *out owned by caller (gw_auth_loop_free), used by one thread only. */
svc_err_t gw_auth_loop_new(gw_auth_t *a, gw_auth_loop_t **out) __attribute__((warn_unused_result));
void gw_auth_loop_free(gw_auth_loop_t *l); /* NULL-safe */

/*
 * Verifies token (len bytes, without "Bearer "): from the loop's cache when
 * it was verified before under the current key set and has not expired
 * since, else gw_jwt_verify (and cached when valid). On GW_JWT_OK *out is
 * the principal. The loop's own thread only.
 */
gw_jwt_err_t gw_auth_verify(gw_auth_loop_t *l, const char *token, size_t len, gw_principal_t *out);
void gw_auth_loop_cache_stats(const gw_auth_loop_t *l, gw_jwt_cache_stats_t *out);

/*
 * The token of an Authorization header value (len bytes): "Bearer" (any
 * case, RFC 7235 §2.1) then one or more spaces and the token (the
 * b64token of RFC 6750 §2.1, not checked here). GW_JWT_OK with *token and
 * *token_len pointing into value; GW_JWT_MISSING for another scheme, and
 * GW_JWT_MALFORMED for "Bearer" with nothing after it.
 */
gw_jwt_err_t gw_auth_bearer_token(const char *value, size_t len, const char **token,
                                  size_t *token_len);

#endif
