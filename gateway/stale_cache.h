/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stale_cache.h - the gateway's cache of recent answers, served only when the
 * upstream cannot answer (issue 16, docs/gateway.md "Stale reads").
 *
 * It is not an HTTP cache: nothing is ever answered from it while the
 * upstream answers. Every 200 of a read the route table marks GW_STALE_OK is
 * stored (the JSON body exactly as it was sent), keyed by the request
 * (gw_cache_key: method, path, normalised query); when the same request then
 * fails because the upstream is unavailable, dispatch.c answers with the
 * stored body if it is at most max_age_ms old. An entry older than that is
 * never served and is dropped (on lookup, or by gw_cache_expire on the main
 * thread's 1 s tick).
 *
 * Bounded: at most max_entries entries and max_bytes bytes (keys, bodies and
 * GW_CACHE_ENTRY_OVERHEAD each); an answer larger than max_bytes / 8 is not
 * kept, so one large page cannot empty the cache. When full, the entry
 * stored or refreshed longest ago goes first. Since every successful read
 * refreshes its entry, that is the least recently read one (LRU), and also
 * the one closest to its bound, the least worth keeping.
 *
 * Threads: one cache is shared by every loop thread (per-loop caches would
 * make a stale answer depend on which loop the client's connection landed
 * on, SO_REUSEPORT's hash). All functions are thread-safe. One mutex guards
 * the table, and it is held only for a lookup plus, at most, a compare or a
 * pointer swap: allocation, copying and free() happen outside it. Entries
 * are immutable once stored and reference-counted, so a hit is read without
 * the lock while a put replaces it; gw_cache_release gives it back.
 */
#ifndef GW_STALE_CACHE_H
#define GW_STALE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "svc/core.h"

typedef struct gw_cache gw_cache_t;

/* The defaults of GATEWAY_STALE_MAX_AGE_MS, _MAX_ENTRIES, _MAX_BYTES. */
#define GW_CACHE_DEFAULT_MAX_AGE_MS  30000
#define GW_CACHE_DEFAULT_MAX_ENTRIES 4096
#define GW_CACHE_DEFAULT_MAX_BYTES   ((size_t)8 << 20)
/* Longest key; a longer request is not cached (gw_cache_key returns 0). */
#define GW_CACHE_KEY_MAX 1024
/* Query parameters at most in a cached request's key. */
#define GW_CACHE_MAX_PARAMS 32
/* What one entry costs besides its key and body (its header, rounded up). */
#define GW_CACHE_ENTRY_OVERHEAD 96

typedef struct gw_cache_opts {
    uint64_t max_age_ms;      /* GW_CACHE_DEFAULT_MAX_AGE_MS; >= 1 */
    size_t max_entries;       /* GW_CACHE_DEFAULT_MAX_ENTRIES; >= 1 */
    size_t max_bytes;         /* GW_CACHE_DEFAULT_MAX_BYTES; >= 8 * GW_CACHE_ENTRY_OVERHEAD */
    const svc_clock_t *clock; /* NULL: the monotonic clock (tests pass a fake one) */
} gw_cache_opts_t;

/* Fills the defaults. */
void gw_cache_opts_init(gw_cache_opts_t *o);

/* *out owned by caller (gw_cache_free). SVC_EINVAL (an option out of
 * range) or SVC_ENOMEM. */
svc_err_t gw_cache_new(const gw_cache_opts_t *o, gw_cache_t **out);
/* No hit may still be held. NULL-safe. */
void gw_cache_free(gw_cache_t *c);

/*
 * Writes the key of a request into out (cap bytes, NUL-terminated) and
 * returns its length; 0 when the request is not to be cached (the key would
 * not fit in cap, more than GW_CACHE_MAX_PARAMS parameters, or a query that
 * is not well-formed percent-encoding, which the binder refuses anyway).
 *
 *   <method> SP <path> [ "?" <query> ]
 *
 * Two requests that can only mean the same thing get the same key:
 *  - path: a %XX of an unreserved character (ALPHA DIGIT - . _ ~) is that
 *    character, other %xx are written in upper case (RFC 3986 §6.2.2); the
 *    path is otherwise kept byte for byte (a %2F stays %2F);
 *  - query, read as url.ParseQuery reads it (what bind.c does): split at
 *    '&', empty parts dropped, "a" is "a=", '+' and %XX decoded; then each
 *    name and value re-encoded one way (unreserved as is, every other byte
 *    %XX) and the parameters sorted by name, values of one name kept in
 *    their order (a repeated field's order matters). No query, or one of
 *    only '&', writes no '?'.
 * Name styles (page_size, pageSize) are not merged: that is the same request
 * only for this route table, not for the key. Pure; thread-safe.
 */
size_t gw_cache_key(const char *method, size_t method_len, const char *path, size_t path_len,
                    const char *query, size_t query_len, char *out, size_t cap);

/*
 * Stores body (copied) as the answer to key, replacing the key's entry, and
 * evicts what no longer fits. An answer identical to the stored one only
 * refreshes its age (no allocation). Returns false when it was not kept
 * (larger than max_bytes / 8: the key's older entry is dropped too, so an
 * outage never serves an answer older than the last one sent; or out of
 * memory).
 */
bool gw_cache_put(gw_cache_t *c, const char *key, size_t key_len, const char *body,
                  size_t body_len);

/* A stored answer, valid until gw_cache_release. */
typedef struct gw_cache_hit {
    const char *body;
    size_t len;
    uint64_t age_ms;               /* since it was stored or last refreshed */
    struct gw_cache_entry *entry_; /* private */
} gw_cache_hit_t;

/* The key's answer if it is at most max_age_ms old: true and *out set (give
 * it back with gw_cache_release). false: none, or too old (then dropped). */
bool gw_cache_get(gw_cache_t *c, const char *key, size_t key_len, gw_cache_hit_t *out);
/* Gives a hit back. */
void gw_cache_release(gw_cache_t *c, gw_cache_hit_t *hit);

/* Drops every entry older than max_age_ms; returns how many. The main
 * thread's tick calls it, so that memory is given back after an outage or a
 * burst of distinct reads, not only when a put needs the room. */
size_t gw_cache_expire(gw_cache_t *c);

typedef struct gw_cache_stats {
    uint64_t entries;   /* stored now */
    uint64_t bytes;     /* what they cost (keys, bodies, GW_CACHE_ENTRY_OVERHEAD each) */
    uint64_t evictions; /* entries dropped for room (max_entries, max_bytes), ever */
    uint64_t expired;   /* entries dropped because they passed max_age_ms, ever */
    uint64_t max_age_ms, max_entries, max_bytes; /* the options */
} gw_cache_stats_t;

void gw_cache_stats(gw_cache_t *c, gw_cache_stats_t *out);

#endif
