/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ratelimit.h - the gateway's request rate limits (issue 36, "Rate limits"):
 * token buckets per (route class, key), in a bounded table shared by the
 * loop threads.
 *
 * Classes. The setting (gw_rl_spec_parse) names a few route classes, each
 * with a rate and a burst: "read=100/s,burst=200;write=10/s,burst=20". The
 * gateway maps each route to a class (GET routes to "read", POST routes to
 * "write"); gw_rl_class_index finds a class by name. A class written
 * "name=off" exists but never limits.
 *
 * Keys. The key is who is limited: the verified principal (the JWT's sub)
 * when there is one, else the client's address (gw_rl_addr_key: an IPv4
 * address, or an IPv6 /64, since one host commonly holds a whole /64). The
 * caller prefixes the kind ("sub:", "ip:"), so that a principal named like
 * an address is not that address's bucket. Keys are compared byte for byte;
 * one of more than GW_RL_KEY_MAX bytes is stored as its first bytes and two
 * seeded 64-bit digests of the whole (a collision needs both to collide).
 *
 * Buckets. A bucket holds at most burst tokens and gains rate tokens a
 * second; a request takes one or is refused. Refill is lazy and exact: with
 * the rate as `count` tokens per `per_ns` nanoseconds, the level is an
 * integer in units of 1/per_ns token, and each nanosecond adds `count` of
 * them, so no fraction of a token is ever lost or rounded; it is brought up
 * to date from the caller's monotonic now_ns at each check (tests pass a
 * fake time). A clock read on another thread that is a little behind the
 * bucket's last check counts as no time passed; time never runs backwards
 * for a bucket.
 *
 * Memory. The table holds at most `capacity` buckets, all allocated by
 * gw_rl_new; it never grows. A check for a key with no bucket takes a free
 * slot, or evicts one: among the GW_RL_EVICT_SCAN least recently used
 * buckets of the shard, the first one that is full at now (a full bucket is
 * exactly what a new one would be, so forgetting it changes no decision);
 * if none of them is full, the least recently used one. Only that second
 * kind of eviction ("partial", counted apart) gives a key a fresh burst
 * earlier than it would have had it; it happens only when about as many
 * keys as the table holds were active within one refill time (burst /
 * rate), which the partial-evictions metric shows, and the answer is a
 * larger capacity. A client with many keys (many tokens, many /64s) can so
 * make others' buckets forgotten early: they get more than their limit,
 * never less, and its own new keys each get one burst, as any new key.
 *
 * Threads. One table serves every loop thread: per-thread tables would let
 * a client whose connections land on N loops (SO_REUSEPORT hashes each
 * connection) have N times its limit. The table is split into shards
 * (GW_RL_DEFAULT_SHARDS, a power of two), each with its own mutex and its
 * own part of the capacity; the key's hash picks the shard. gw_rl_check
 * runs on the loop threads and holds one shard's mutex for a hash lookup, a
 * few integer operations and at most GW_RL_EVICT_SCAN list steps: no
 * allocation, and no system call unless another loop holds that shard's
 * mutex at that instant (then a futex wait for that short section).
 * gw_rl_render and gw_rl_stats may run on any
 * thread at once with checks (relaxed atomics; not one instant's
 * snapshot). gw_rl_spec_parse, gw_rl_headers_format and gw_rl_addr_key are
 * pure. gw_rl_new and gw_rl_free run on the main thread, before the loops
 * start and after they stop.
 */
#ifndef GW_RATELIMIT_H
#define GW_RATELIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "svc/core.h"

/* Classes in one setting at most, and the longest class name (+ NUL). */
#define GW_RL_MAX_CLASSES    8
#define GW_RL_CLASS_NAME_MAX 16
/* Longest key stored as it is (a longer one is folded, see above). */
#define GW_RL_KEY_MAX 64
/* Least recently used buckets looked at for a full one to evict. */
#define GW_RL_EVICT_SCAN 8
/* The defaults of GATEWAY_RATE_LIMIT_CAPACITY and of the shard count. */
#define GW_RL_DEFAULT_CAPACITY 65536
#define GW_RL_DEFAULT_SHARDS   16
/* Capacity bounds. A bucket costs 108 bytes (a 104-byte slot and its
 * 4-byte hash index entry), all allocated by gw_rl_new: 6.75 MiB for the
 * default 65,536. */
#define GW_RL_MIN_CAPACITY 16
#define GW_RL_MAX_CAPACITY ((size_t)1 << 24)
/* Longest rate and burst the parser takes: the level's arithmetic stays in
 * 64 bits (burst * the rate's period in ns <= 1e6 * 3.6e12 ns). */
#define GW_RL_MAX_BURST      1000000u
#define GW_RL_MAX_RATE_COUNT 1000000u
/* Bytes enough for any address key written by gw_rl_addr_key. */
#define GW_RL_ADDR_KEY_MAX 48

/* One class: `count` tokens every `per_ns` nanoseconds (the fraction as
 * written, reduced; "0.5/s" is 1 per 2e9), up to `burst` tokens. */
typedef struct gw_rl_class {
    char name[GW_RL_CLASS_NAME_MAX];
    bool off; /* "name=off": never limited */
    uint64_t count, per_ns;
    uint64_t burst;
} gw_rl_class_t;

/* A parsed setting; n == 0 is "off" (no limiter at all: create none). */
typedef struct gw_rl_spec {
    size_t n;
    gw_rl_class_t cls[GW_RL_MAX_CLASSES];
} gw_rl_spec_t;

/*
 * Parses a GATEWAY_RATE_LIMITS value:
 *
 *   spec   = "off" | class *( ";" class )
 *   class  = name "=" ( "off" | rate [ "," "burst=" integer ] )
 *   rate   = decimal "/" ( "s" | "m" | "h" )      e.g. 100/s, 0.5/s, 30/m
 *   name   = 1 to 15 of [a-z0-9_-], each name once
 *
 * Spaces around the parts are ignored. The decimal has at most 3 digits
 * after the point and is > 0. A missing burst is the rate's count per its
 * own unit rounded up (100/s: 100; 0.5/s: 1). SVC_EINVAL with errbuf
 * naming the part and what is wrong with it ("write=10/x: unknown unit
 * \"/x\" ..."). *out is written only on SVC_OK. Pure.
 */
svc_err_t gw_rl_spec_parse(const char *text, gw_rl_spec_t *out, char errbuf[static SVC_ERRBUF_LEN]);

typedef struct gw_rl gw_rl_t;

typedef struct gw_rl_opts {
    const gw_rl_spec_t *spec; /* borrowed during gw_rl_new (copied); n >= 1 */
    size_t capacity;          /* GW_RL_DEFAULT_CAPACITY; GW_RL_MIN_CAPACITY .. GW_RL_MAX_CAPACITY */
    size_t shards;            /* GW_RL_DEFAULT_SHARDS; a power of two (halved until each shard
                               * has 8 buckets or more; capacity is rounded down to a multiple) */
} gw_rl_opts_t;

/* Fills the defaults (no spec). Cannot fail. */
void gw_rl_opts_init(gw_rl_opts_t *o);
/* *out owned by caller (gw_rl_free). SVC_EINVAL (no spec or no class, a
 * class out of the parser's bounds, capacity or shards out of range) or
 * SVC_ENOMEM. Every bucket is allocated here. */
svc_err_t gw_rl_new(const gw_rl_opts_t *o, gw_rl_t **out);
/* No check may be running. NULL-safe. */
void gw_rl_free(gw_rl_t *rl);

/* The index of the class named name (len bytes), or -1. Thread-safe. */
int gw_rl_class_index(const gw_rl_t *rl, const char *name, size_t len);

/* One check's outcome, and what the response headers say about it. */
typedef struct gw_rl_decision {
    bool allowed;
    bool limited_class;     /* false: the class is "off" (send no headers) */
    const char *policy;     /* the class name; valid until gw_rl_free */
    uint64_t quota;         /* RateLimit-Policy q: the burst */
    uint64_t window_s;      /* RateLimit-Policy w: burst / rate, rounded up, >= 1 */
    uint64_t remaining;     /* RateLimit r: whole tokens left after this request */
    uint64_t reset_s;       /* RateLimit t: until the bucket is full again, rounded up */
    uint64_t retry_after_s; /* refused: until one token is there, rounded up, >= 1; else 0 */
} gw_rl_decision_t;

/*
 * Takes one token from the bucket of (cls, key) at now_ns, creating the
 * bucket full if there is none. key: borrowed, key_len >= 1 bytes.
 * SVC_EINVAL (cls out of range, empty key: *out says allowed, so that a
 * caller's bug never refuses traffic). Loop threads; never blocks for long.
 */
svc_err_t gw_rl_check(gw_rl_t *rl, size_t cls, const char *key, size_t key_len, uint64_t now_ns,
                      gw_rl_decision_t *out);

/* Header values of one decision, NUL-terminated (sized for any decision). */
typedef struct gw_rl_headers {
    char policy[64];      /* RateLimit-Policy */
    char ratelimit[64];   /* RateLimit */
    char retry_after[24]; /* Retry-After (delta-seconds), "" when allowed */
} gw_rl_headers_t;

/*
 * Formats the headers of d as draft-ietf-httpapi-ratelimit-headers-10
 * (27 September 2025) defines them: structured-field Lists (RFC 9651) of
 * one Item, the policy's name as a String, with Integer parameters. (-11,
 * 23 May 2026, is the latest revision found; it was not read here.)
 *
 *   RateLimit-Policy: "read";q=200;w=2
 *   RateLimit: "read";r=42;t=1
 *   Retry-After: 1                      (only when refused: RFC 9110 10.2.3)
 *
 * The policy says q requests per w seconds with q the burst: what a token
 * bucket lets through at once, and over w seconds its sustained rate. No
 * "pk" (partition key) parameter is sent: it would echo the key. d with
 * limited_class false gives three empty strings. Pure.
 */
void gw_rl_headers_format(const gw_rl_decision_t *d, gw_rl_headers_t *out);

/*
 * The key of a client address: "ip:" and the IPv4 address, or "ip6:" and
 * the first 64 bits of an IPv6 address written as four hex groups
 * ("ip6:2001:db8:0:1"); an IPv4-mapped IPv6 address is its IPv4. Writes at
 * most cap bytes (GW_RL_ADDR_KEY_MAX is enough), NUL-terminated; returns
 * the length, 0 for another family or a cap too small. Pure.
 */
size_t gw_rl_addr_key(const struct sockaddr *sa, char *out, size_t cap);

typedef struct gw_rl_stats {
    uint64_t allowed[GW_RL_MAX_CLASSES], limited[GW_RL_MAX_CLASSES];
    uint64_t evictions_full;    /* evicted full: no decision changed */
    uint64_t evictions_partial; /* evicted before refilled: its key got a fresh burst */
    uint64_t buckets, capacity;
} gw_rl_stats_t;

/* Counters so far (summed over the shards). Any thread. */
void gw_rl_stats(const gw_rl_t *rl, gw_rl_stats_t *out);

/*
 * Prometheus text, rendered like gw_failfast_render(): snprintf semantics
 * over buf/cap, *len the full length (cap 0 sizes it); SVC_ERANGE when it
 * did not fit. Any thread.
 *   gateway_ratelimit_allowed_total{class}   requests let through
 *   gateway_ratelimit_limited_total{class}   requests answered 429
 *   gateway_ratelimit_evictions_total{state="full"|"partial"}
 *   gateway_ratelimit_buckets                buckets in use (gauge)
 *   gateway_ratelimit_buckets_max            the capacity (gauge)
 */
svc_err_t gw_rl_render(const gw_rl_t *rl, char *buf, size_t cap, size_t *len);

#endif
