/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jwt_cache.h - a fixed-size cache of verified tokens, so that a client that
 * sends the same token again pays a SHA-256 and a lookup instead of a
 * signature verification (tens of microseconds for ES256, more for RS256).
 *
 * Keyed by the SHA-256 of the whole token, never by a cheaper hash: a
 * collision would hand one token's principal to another. It stores the
 * principal; exp is checked again on every hit (an expired entry is
 * dropped and reported as a miss, so the verifier says why). 4-way set
 * associative with LRU in each set: bounded memory, O(1) operations, no
 * allocation after creation.
 *
 * Not thread-safe: one cache per loop thread (auth.h says why).
 */
#ifndef GW_JWT_CACHE_H
#define GW_JWT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jwt.h"

#define GW_JWT_CACHE_KEY_LEN     32 /* SHA-256 */
#define GW_JWT_CACHE_WAYS        4
#define GW_JWT_CACHE_MAX_ENTRIES (1u << 20)

typedef struct gw_jwt_cache gw_jwt_cache_t;

typedef struct gw_jwt_cache_stats {
    uint64_t hits, misses, expired, evictions, flushes;
} gw_jwt_cache_stats_t;

/* entries is rounded up to a power of two of sets of GW_JWT_CACHE_WAYS, at
 * most GW_JWT_CACHE_MAX_ENTRIES; >= 1. *out owned by caller
 * (gw_jwt_cache_free). SVC_EINVAL or SVC_ENOMEM. */
svc_err_t gw_jwt_cache_new(size_t entries, gw_jwt_cache_t **out);
void gw_jwt_cache_free(gw_jwt_cache_t *c); /* NULL-safe */
/* Entries the cache can hold. */
size_t gw_jwt_cache_capacity(const gw_jwt_cache_t *c);

/* The principal stored under key, if any and still valid at now_s with
 * leeway_s (gw_jwt_still_valid). */
bool gw_jwt_cache_get(gw_jwt_cache_t *c, const uint8_t key[GW_JWT_CACHE_KEY_LEN], int64_t now_s,
                      uint32_t leeway_s, gw_principal_t *out);
/* Stores p under key, replacing the set's least recently used entry. */
void gw_jwt_cache_put(gw_jwt_cache_t *c, const uint8_t key[GW_JWT_CACHE_KEY_LEN],
                      const gw_principal_t *p);
/* Drops every entry (the key set changed). */
void gw_jwt_cache_clear(gw_jwt_cache_t *c);
void gw_jwt_cache_stats(const gw_jwt_cache_t *c, gw_jwt_cache_stats_t *out);

#endif
