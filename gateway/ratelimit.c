/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ratelimit.c - token buckets in a sharded, preallocated table
 * (ratelimit.h): per shard, an array of slots, a chained hash index of
 * 32-bit slot numbers and a list from most to least recently used; the
 * setting's parser; the header and metrics text.
 */
#include <assert.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "ratelimit.h"

#define NIL      UINT32_MAX
#define NS_PER_S UINT64_C(1000000000)
/* A folded key: its first FOLD_PREFIX bytes, then two 64-bit digests. */
#define FOLD_PREFIX (GW_RL_KEY_MAX - 16)
#define KEY_FOLDED  (GW_RL_KEY_MAX + 1)

static_assert(sizeof(((gw_rl_headers_t *)0)->policy) >=
                  1 + (GW_RL_CLASS_NAME_MAX - 1) + 4 + 20 + 3 + 20 + 1,
              "gw_rl_headers_t.policy holds any item");
static_assert(sizeof(((gw_rl_headers_t *)0)->ratelimit) == sizeof(((gw_rl_headers_t *)0)->policy),
              "gw_rl_headers_t.ratelimit holds any item");
static_assert(sizeof(((gw_rl_headers_t *)0)->retry_after) >= 21, "Retry-After holds any value");

/* A class as the table uses it. The level of a bucket is kept in units of
 * 1 / per_ns token: a token is per_ns units and each nanosecond adds count
 * units, so refill is an integer product and no remainder is ever lost. */
typedef struct cls {
    gw_rl_class_t def;
    uint64_t cap;      /* burst * per_ns: a full bucket */
    uint64_t window_s; /* the policy's w */
} cls_t;

typedef struct slot {
    uint64_t hash;
    uint64_t level;    /* units, <= cap of its class */
    uint64_t stamp_ns; /* the time level is for */
    uint32_t hnext;    /* the hash chain */
    uint32_t newer, older;
    uint8_t cls;
    uint8_t key_len; /* bytes stored, or KEY_FOLDED */
    char key[GW_RL_KEY_MAX];
} slot_t;

typedef struct shard {
    pthread_mutex_t mu;
    /* under mu */
    uint32_t *heads; /* [mask + 1] */
    slot_t *slots;   /* [cap] */
    uint32_t mask, cap, used, newest, oldest;
    /* written under mu, read by any thread */
    _Atomic uint64_t allowed[GW_RL_MAX_CLASSES], limited[GW_RL_MAX_CLASSES];
    _Atomic uint64_t evictions_full, evictions_partial, buckets;
} __attribute__((aligned(64))) shard_t; /* one cache line apart: loops on two shards share none */

struct gw_rl {
    size_t n_cls, n_shards, capacity;
    cls_t cls[GW_RL_MAX_CLASSES];
    uint64_t seed[2];
    shard_t *shards;
};

/* ------------------------------------------------------------------------
 * The setting
 * ------------------------------------------------------------------------ */

typedef struct span {
    const char *p;
    size_t n;
} span_t;

static span_t trim(span_t s)
{
    while (s.n > 0 && (s.p[0] == ' ' || s.p[0] == '\t')) {
        s.p++;
        s.n--;
    }
    while (s.n > 0 && (s.p[s.n - 1] == ' ' || s.p[s.n - 1] == '\t'))
        s.n--;
    return s;
}

static bool span_is(span_t s, const char *lit)
{
    return s.n == strlen(lit) && memcmp(s.p, lit, s.n) == 0;
}

/* Splits s at the first sep: *head before it, s after it (n 0 when none). */
static span_t split(span_t *s, char sep)
{
    const char *at = memchr(s->p, sep, s->n);
    span_t head = {s->p, at != NULL ? (size_t)(at - s->p) : s->n};

    s->p += head.n + (at != NULL);
    s->n -= head.n + (at != NULL);
    return head;
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b != 0) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* "100", "0.5", "2.25": *mant / 10^*digits; false when not such a number
 * or above max. */
static bool parse_decimal(span_t s, uint64_t max, uint64_t *mant, unsigned *digits)
{
    uint64_t v = 0, whole_limit = max;
    bool point = false, any = false;

    *digits = 0;
    for (size_t i = 0; i < s.n; i++) {
        char ch = s.p[i];
        if (ch == '.' && !point && any) {
            point = true;
            continue;
        }
        if (ch < '0' || ch > '9' || (point && *digits == 3))
            return false;
        v = v * 10 + (uint64_t)(ch - '0');
        any = true;
        if (point)
            (*digits)++;
        else if (v > whole_limit)
            return false;
    }
    if (!any || (point && *digits == 0))
        return false;
    *mant = v;
    return true;
}

static uint64_t pow10u(unsigned d)
{
    uint64_t p = 1;

    while (d-- > 0)
        p *= 10;
    return p;
}

static svc_err_t parse_rate(span_t part, span_t rate, gw_rl_class_t *c,
                            char errbuf[static SVC_ERRBUF_LEN])
{
    span_t num = trim(split(&rate, '/')), unit = trim(rate);
    uint64_t mant, unit_ns, g;
    unsigned digits;

    if (span_is(unit, "s"))
        unit_ns = NS_PER_S;
    else if (span_is(unit, "m"))
        unit_ns = 60 * NS_PER_S;
    else if (span_is(unit, "h"))
        unit_ns = 3600 * NS_PER_S;
    else {
        svc_errbuf_set(errbuf, "\"%.*s\": unknown unit \"/%.*s\" (use /s, /m or /h)", (int)part.n,
                       part.p, (int)unit.n, unit.p);
        return SVC_EINVAL;
    }
    if (!parse_decimal(num, GW_RL_MAX_RATE_COUNT, &mant, &digits) || mant == 0) {
        svc_errbuf_set(errbuf,
                       "\"%.*s\": the rate \"%.*s\" is not a number above 0 and up to %u "
                       "with at most 3 decimals",
                       (int)part.n, part.p, (int)num.n, num.p, GW_RL_MAX_RATE_COUNT);
        return SVC_EINVAL;
    }
    c->count = mant;
    c->per_ns = unit_ns * pow10u(digits);
    g = gcd(c->count, c->per_ns);
    c->count /= g;
    c->per_ns /= g;
    /* The default burst: one unit's worth, rounded up. */
    c->burst = (mant + pow10u(digits) - 1) / pow10u(digits);
    return SVC_OK;
}

static svc_err_t parse_burst(span_t part, span_t b, gw_rl_class_t *c,
                             char errbuf[static SVC_ERRBUF_LEN])
{
    span_t name = trim(split(&b, '=')), val = trim(b);
    uint64_t v;
    unsigned digits;

    if (!span_is(name, "burst")) {
        svc_errbuf_set(errbuf, "\"%.*s\": unknown parameter \"%.*s\" (only burst=N)", (int)part.n,
                       part.p, (int)name.n, name.p);
        return SVC_EINVAL;
    }
    if (!parse_decimal(val, GW_RL_MAX_BURST, &v, &digits) || digits > 0 || v == 0) {
        svc_errbuf_set(errbuf, "\"%.*s\": burst \"%.*s\" is not a whole number from 1 to %u",
                       (int)part.n, part.p, (int)val.n, val.p, GW_RL_MAX_BURST);
        return SVC_EINVAL;
    }
    c->burst = v;
    return SVC_OK;
}

static bool name_ok(span_t n)
{
    if (n.n == 0 || n.n >= GW_RL_CLASS_NAME_MAX)
        return false;
    for (size_t i = 0; i < n.n; i++) {
        char ch = n.p[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-'))
            return false;
    }
    return true;
}

/* Whether burst * per_ns, a full bucket in units, fits in 63 bits. */
static bool class_fits(const gw_rl_class_t *c)
{
    return c->count >= 1 && c->per_ns >= 1 && c->burst >= 1 && c->burst <= GW_RL_MAX_BURST &&
           c->per_ns <= (UINT64_C(1) << 63) / c->burst;
}

static svc_err_t parse_class(span_t part, gw_rl_class_t *c, char errbuf[static SVC_ERRBUF_LEN])
{
    span_t rest = part, name = trim(split(&rest, '=')), rate;
    bool comma;
    svc_err_t err;

    memset(c, 0, sizeof *c);
    if (name.n == part.n || !name_ok(name)) { /* no '=', or a bad name */
        svc_errbuf_set(errbuf, "\"%.*s\": a class is name=rate, the name 1 to %d of a-z 0-9 _ -",
                       (int)part.n, part.p, GW_RL_CLASS_NAME_MAX - 1);
        return SVC_EINVAL;
    }
    memcpy(c->name, name.p, name.n);
    rest = trim(rest);
    if (span_is(rest, "off")) {
        c->off = true;
        return SVC_OK;
    }
    /* A comma promises a parameter: "100/s," is a burst left out, not 100/s. */
    comma = memchr(rest.p, ',', rest.n) != NULL;
    rate = trim(split(&rest, ','));
    err = parse_rate(part, rate, c, errbuf);
    if (err == SVC_OK && comma)
        err = parse_burst(part, trim(rest), c, errbuf);
    if (err == SVC_OK && !class_fits(c)) {
        svc_errbuf_set(errbuf,
                       "\"%.*s\": rate and burst too large together (the rate's period "
                       "times the burst must stay under 292 years)",
                       (int)part.n, part.p);
        err = SVC_EINVAL;
    }
    return err;
}

svc_err_t gw_rl_spec_parse(const char *text, gw_rl_spec_t *out, char errbuf[static SVC_ERRBUF_LEN])
{
    gw_rl_spec_t spec;
    span_t rest = trim((span_t){text, strlen(text)});

    memset(&spec, 0, sizeof spec);
    if (span_is(rest, "off")) {
        *out = spec;
        return SVC_OK;
    }
    while (rest.n > 0 || spec.n == 0) {
        span_t part = trim(split(&rest, ';'));
        svc_err_t err;

        if (spec.n == GW_RL_MAX_CLASSES) {
            svc_errbuf_set(errbuf, "more than %d classes", GW_RL_MAX_CLASSES);
            return SVC_EINVAL;
        }
        err = parse_class(part, &spec.cls[spec.n], errbuf);
        if (err != SVC_OK)
            return err;
        for (size_t i = 0; i < spec.n; i++)
            if (strcmp(spec.cls[i].name, spec.cls[spec.n].name) == 0) {
                svc_errbuf_set(errbuf, "\"%.*s\": class \"%s\" is named twice", (int)part.n, part.p,
                               spec.cls[i].name);
                return SVC_EINVAL;
            }
        spec.n++;
    }
    *out = spec;
    return SVC_OK;
}

/* ------------------------------------------------------------------------
 * The table
 * ------------------------------------------------------------------------ */

void gw_rl_opts_init(gw_rl_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->capacity = GW_RL_DEFAULT_CAPACITY;
    o->shards = GW_RL_DEFAULT_SHARDS;
}

static bool opts_ok(const gw_rl_opts_t *o)
{
    if (o->spec == NULL || o->spec->n == 0 || o->spec->n > GW_RL_MAX_CLASSES ||
        o->capacity < GW_RL_MIN_CAPACITY || o->capacity > GW_RL_MAX_CAPACITY || o->shards == 0 ||
        (o->shards & (o->shards - 1)) != 0)
        return false;
    for (size_t i = 0; i < o->spec->n; i++)
        if (!o->spec->cls[i].off && !class_fits(&o->spec->cls[i]))
            return false;
    return true;
}

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

static void class_init(cls_t *c, const gw_rl_class_t *def)
{
    c->def = *def;
    c->def.name[GW_RL_CLASS_NAME_MAX - 1] = '\0';
    if (def->off)
        return;
    c->cap = def->burst * def->per_ns;
    /* The time a bucket takes from empty to full, in whole seconds. */
    c->window_s = ceil_div(ceil_div(c->cap, def->count), NS_PER_S);
    if (c->window_s == 0)
        c->window_s = 1;
}

static svc_err_t shard_init(shard_t *s, uint32_t cap)
{
    uint32_t heads = 1;

    while (heads < cap)
        heads <<= 1;
    if (pthread_mutex_init(&s->mu, NULL) != 0)
        return SVC_ENOMEM;
    s->heads = malloc(heads * sizeof *s->heads);
    s->slots = calloc(cap, sizeof *s->slots);
    if (s->heads == NULL || s->slots == NULL)
        return SVC_ENOMEM;
    memset(s->heads, 0xff, heads * sizeof *s->heads); /* NIL */
    s->mask = heads - 1;
    s->cap = cap;
    s->newest = s->oldest = NIL;
    return SVC_OK;
}

svc_err_t gw_rl_new(const gw_rl_opts_t *o, gw_rl_t **out)
{
    gw_rl_t *rl;
    size_t shards, per_shard;
    svc_err_t err = SVC_OK;

    *out = NULL;
    if (!opts_ok(o))
        return SVC_EINVAL;
    rl = calloc(1, sizeof *rl);
    if (rl == NULL)
        return SVC_ENOMEM;
    rl->n_cls = o->spec->n;
    for (size_t i = 0; i < rl->n_cls; i++)
        class_init(&rl->cls[i], &o->spec->cls[i]);
    /* Keys come from clients: a per-process seed keeps them from choosing
     * keys that share a shard or a chain. */
    if (getrandom(rl->seed, sizeof rl->seed, GRND_NONBLOCK) != (ssize_t)sizeof rl->seed) {
        rl->seed[0] = svc_now_ns() ^ (uint64_t)(uintptr_t)rl;
        rl->seed[1] = rl->seed[0] * UINT64_C(0x9e3779b97f4a7c15);
    }
    /* At least 8 buckets a shard, so that the eviction scan has a choice. */
    shards = o->shards;
    while (shards > 1 && o->capacity / shards < 8)
        shards >>= 1;
    per_shard = o->capacity / shards; /* the whole table is at most capacity */
    rl->capacity = per_shard * shards;
    rl->shards = aligned_alloc(64, shards * sizeof *rl->shards);
    if (rl->shards == NULL) {
        free(rl);
        return SVC_ENOMEM;
    }
    memset(rl->shards, 0, shards * sizeof *rl->shards);
    for (size_t i = 0; i < shards && err == SVC_OK; i++, rl->n_shards++)
        err = shard_init(&rl->shards[i], (uint32_t)per_shard);
    if (err != SVC_OK) {
        gw_rl_free(rl);
        return err;
    }
    *out = rl;
    return SVC_OK;
}

void gw_rl_free(gw_rl_t *rl)
{
    if (rl == NULL)
        return;
    for (size_t i = 0; i < rl->n_shards; i++) {
        free(rl->shards[i].heads);
        free(rl->shards[i].slots);
        pthread_mutex_destroy(&rl->shards[i].mu);
    }
    free(rl->shards);
    free(rl);
}

int gw_rl_class_index(const gw_rl_t *rl, const char *name, size_t len)
{
    for (size_t i = 0; i < rl->n_cls; i++)
        if (strlen(rl->cls[i].def.name) == len && memcmp(rl->cls[i].def.name, name, len) == 0)
            return (int)i;
    return -1;
}

/* Eight bytes a step (a multiply, a rotate and a multiply), from a seed,
 * then murmur3's final mix, so that both the shard (high bits) and the
 * chain (low bits) depend on every byte. Not FNV-1a's byte loop, which
 * was measurably slower per check (docs/bench/history.md, 2026-12-07). */
static uint64_t step(uint64_t h, uint64_t w)
{
    h ^= w * UINT64_C(0x9e3779b97f4a7c15);
    h = (h << 31 | h >> 33) * UINT64_C(0xc2b2ae3d27d4eb4f);
    return h;
}

static uint64_t hash_of(uint64_t seed, uint8_t cls, const char *key, size_t len)
{
    uint64_t h = step(seed, (uint64_t)len << 8 | cls), w;

    for (; len >= 8; key += 8, len -= 8) {
        memcpy(&w, key, 8);
        h = step(h, w);
    }
    if (len > 0) {
        w = 0;
        memcpy(&w, key, len);
        h = step(h, w);
    }
    h ^= h >> 33;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    return h;
}

/* What a slot stores for a key: the key itself, or its fold. */
typedef struct stored {
    char key[GW_RL_KEY_MAX];
    uint8_t len;
} stored_t;

static void store_key(const gw_rl_t *rl, uint8_t cls, const char *key, size_t len, stored_t *st)
{
    uint64_t d[2];

    if (len <= GW_RL_KEY_MAX) {
        memcpy(st->key, key, len);
        st->len = (uint8_t)len;
        return;
    }
    d[0] = hash_of(rl->seed[0] ^ UINT64_C(0x5bd1e995), cls, key, len);
    d[1] = hash_of(rl->seed[1], cls, key, len);
    memcpy(st->key, key, FOLD_PREFIX);
    memcpy(st->key + FOLD_PREFIX, d, sizeof d);
    st->len = KEY_FOLDED;
}

static size_t stored_bytes(uint8_t len)
{
    return len == KEY_FOLDED ? GW_RL_KEY_MAX : len;
}

static uint32_t find(const shard_t *s, uint64_t h, uint8_t cls, const stored_t *st)
{
    for (uint32_t i = s->heads[h & s->mask]; i != NIL; i = s->slots[i].hnext) {
        const slot_t *e = &s->slots[i];
        if (e->hash == h && e->cls == cls && e->key_len == st->len &&
            memcmp(e->key, st->key, stored_bytes(st->len)) == 0)
            return i;
    }
    return NIL;
}

static void lru_remove(shard_t *s, uint32_t i)
{
    slot_t *e = &s->slots[i];

    if (e->newer != NIL)
        s->slots[e->newer].older = e->older;
    else
        s->newest = e->older;
    if (e->older != NIL)
        s->slots[e->older].newer = e->newer;
    else
        s->oldest = e->newer;
}

static void lru_push(shard_t *s, uint32_t i)
{
    slot_t *e = &s->slots[i];

    e->newer = NIL;
    e->older = s->newest;
    if (s->newest != NIL)
        s->slots[s->newest].newer = i;
    else
        s->oldest = i;
    s->newest = i;
}

static void chain_remove(shard_t *s, uint32_t i)
{
    uint32_t *pp = &s->heads[s->slots[i].hash & s->mask];

    while (*pp != i)
        pp = &s->slots[*pp].hnext;
    *pp = s->slots[i].hnext;
}

/* Written under the shard's mutex, read by any thread: a plain increment
 * published with a relaxed store (one writer at a time). */
static void bump(_Atomic uint64_t *v)
{
    atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* The bucket's level at now, and its stamp moved to now. A now behind the
 * stamp (another loop's clock read a little earlier) adds nothing. */
static void refill(const cls_t *c, slot_t *e, uint64_t now)
{
    uint64_t dt, room;

    if (now <= e->stamp_ns)
        return;
    dt = now - e->stamp_ns;
    room = c->cap - e->level;
    /* dt * count reaches room exactly when dt > room / count: no overflow. */
    if (dt > room / c->def.count)
        e->level = c->cap;
    else
        e->level += dt * c->def.count;
    e->stamp_ns = now;
}

static bool full_at(const gw_rl_t *rl, const slot_t *e, uint64_t now)
{
    const cls_t *c = &rl->cls[e->cls];

    return e->level == c->cap ||
           (now > e->stamp_ns && now - e->stamp_ns > (c->cap - e->level) / c->def.count);
}

/* A slot for a new bucket: a free one, else an evicted one (ratelimit.h). */
static uint32_t take_slot(const gw_rl_t *rl, shard_t *s, uint64_t now)
{
    uint32_t victim = s->oldest, i = s->oldest;

    if (s->used < s->cap) {
        s->used++;
        atomic_store_explicit(&s->buckets, s->used, memory_order_relaxed);
        return s->used - 1;
    }
    for (int n = 0; n < GW_RL_EVICT_SCAN && i != NIL; n++, i = s->slots[i].newer)
        if (full_at(rl, &s->slots[i], now)) {
            victim = i;
            break;
        }
    bump(full_at(rl, &s->slots[victim], now) ? &s->evictions_full : &s->evictions_partial);
    chain_remove(s, victim);
    lru_remove(s, victim);
    return victim;
}

static uint32_t bucket_for(const gw_rl_t *rl, shard_t *s, uint64_t h, uint8_t cls,
                           const stored_t *st, uint64_t now)
{
    uint32_t i = find(s, h, cls, st);
    slot_t *e;

    if (i != NIL) {
        lru_remove(s, i);
        lru_push(s, i);
        return i;
    }
    i = take_slot(rl, s, now);
    e = &s->slots[i];
    e->hash = h;
    e->cls = cls;
    e->key_len = st->len;
    memcpy(e->key, st->key, stored_bytes(st->len));
    e->level = rl->cls[cls].cap;
    e->stamp_ns = now;
    e->hnext = s->heads[h & s->mask];
    s->heads[h & s->mask] = i;
    lru_push(s, i);
    return i;
}

/* Fills the figures of the headers from the bucket after the decision. */
static void describe(const cls_t *c, const slot_t *e, gw_rl_decision_t *out)
{
    out->quota = c->def.burst;
    out->window_s = c->window_s;
    out->remaining = e->level / c->def.per_ns;
    out->reset_s = ceil_div(ceil_div(c->cap - e->level, c->def.count), NS_PER_S);
    out->retry_after_s = 0;
    if (!out->allowed) {
        uint64_t ns = ceil_div(c->def.per_ns - e->level, c->def.count);
        out->retry_after_s = ceil_div(ns, NS_PER_S);
        if (out->retry_after_s == 0)
            out->retry_after_s = 1;
    }
}

svc_err_t gw_rl_check(gw_rl_t *rl, size_t cls, const char *key, size_t key_len, uint64_t now_ns,
                      gw_rl_decision_t *out)
{
    const cls_t *c;
    stored_t st;
    uint64_t h;
    shard_t *s;
    slot_t *e;

    memset(out, 0, sizeof *out);
    out->allowed = true;
    if (cls >= rl->n_cls || key_len == 0)
        return SVC_EINVAL;
    c = &rl->cls[cls];
    out->policy = c->def.name;
    if (c->def.off)
        return SVC_OK;
    out->limited_class = true;
    h = hash_of(rl->seed[0], (uint8_t)cls, key, key_len);
    store_key(rl, (uint8_t)cls, key, key_len, &st);
    s = &rl->shards[(h >> 40) & (rl->n_shards - 1)];
    pthread_mutex_lock(&s->mu);
    e = &s->slots[bucket_for(rl, s, h, (uint8_t)cls, &st, now_ns)];
    refill(c, e, now_ns);
    out->allowed = e->level >= c->def.per_ns;
    if (out->allowed)
        e->level -= c->def.per_ns;
    bump(out->allowed ? &s->allowed[cls] : &s->limited[cls]);
    describe(c, e, out);
    pthread_mutex_unlock(&s->mu);
    return SVC_OK;
}

/* ------------------------------------------------------------------------
 * Headers, address keys, metrics
 * ------------------------------------------------------------------------ */

/* Writes v in decimal at p; returns the end (20 digits at most). */
static char *put_u64(char *p, uint64_t v)
{
    char tmp[20];
    size_t n = 0;

    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    while (n > 0)
        *p++ = tmp[--n];
    return p;
}

/* "<name>";<a>=<x>;<b>=<y> into out (64 bytes: 1 + 15 + 4 + 20 + 3 + 20 +
 * NUL). The name is [a-z0-9_-] (the parser's rule), so it needs no escaping
 * inside a structured-field String. By hand rather than snprintf: every
 * answered request formats two of these, and two snprintf calls cost more
 * than the check itself (docs/bench/history.md, 2026-12-07). */
static void put_item(char *out, const char *name, char a, uint64_t x, char b, uint64_t y)
{
    size_t n = strnlen(name, GW_RL_CLASS_NAME_MAX - 1);
    char *p = out;

    *p++ = '"';
    memcpy(p, name, n);
    p += n;
    *p++ = '"';
    *p++ = ';';
    *p++ = a;
    *p++ = '=';
    p = put_u64(p, x);
    *p++ = ';';
    *p++ = b;
    *p++ = '=';
    p = put_u64(p, y);
    *p = '\0';
}

void gw_rl_headers_format(const gw_rl_decision_t *d, gw_rl_headers_t *out)
{
    out->policy[0] = out->ratelimit[0] = out->retry_after[0] = '\0';
    if (!d->limited_class || d->policy == NULL)
        return;
    put_item(out->policy, d->policy, 'q', d->quota, 'w', d->window_s);
    put_item(out->ratelimit, d->policy, 'r', d->remaining, 't', d->reset_s);
    if (!d->allowed)
        *put_u64(out->retry_after, d->retry_after_s) = '\0';
}

size_t gw_rl_addr_key(const struct sockaddr *sa, char *out, size_t cap)
{
    char ip[INET_ADDRSTRLEN];
    const unsigned char *b;
    int n;

    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        if (inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip) == NULL)
            return 0;
        n = snprintf(out, cap, "ip:%s", ip);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        b = in6->sin6_addr.s6_addr;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
            n = snprintf(out, cap, "ip:%u.%u.%u.%u", b[12], b[13], b[14], b[15]);
        else
            n = snprintf(out, cap, "ip6:%x:%x:%x:%x", b[0] << 8 | b[1], b[2] << 8 | b[3],
                         b[4] << 8 | b[5], b[6] << 8 | b[7]);
    } else {
        return 0;
    }
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

void gw_rl_stats(const gw_rl_t *rl, gw_rl_stats_t *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < rl->n_shards; i++) {
        shard_t *s = &rl->shards[i];
        for (size_t c = 0; c < rl->n_cls; c++) {
            out->allowed[c] += atomic_load_explicit(&s->allowed[c], memory_order_relaxed);
            out->limited[c] += atomic_load_explicit(&s->limited[c], memory_order_relaxed);
        }
        out->evictions_full += atomic_load_explicit(&s->evictions_full, memory_order_relaxed);
        out->evictions_partial += atomic_load_explicit(&s->evictions_partial, memory_order_relaxed);
        out->buckets += atomic_load_explicit(&s->buckets, memory_order_relaxed);
    }
    out->capacity = rl->capacity;
}

svc_err_t gw_rl_render(const gw_rl_t *rl, char *buf, size_t cap, size_t *len)
{
    svc_text_t t = svc_text_on(buf, cap);
    gw_rl_stats_t st;

    gw_rl_stats(rl, &st);
    svc_text_printf(&t,
                    "# HELP gateway_ratelimit_allowed_total Requests let through by the "
                    "rate limiter, by class.\n# TYPE gateway_ratelimit_allowed_total counter\n");
    for (size_t c = 0; c < rl->n_cls; c++)
        svc_text_printf(&t, "gateway_ratelimit_allowed_total{class=\"%s\"} %llu\n",
                        rl->cls[c].def.name, (unsigned long long)st.allowed[c]);
    svc_text_printf(&t, "# HELP gateway_ratelimit_limited_total Requests answered 429 by the rate "
                        "limiter, by class.\n# TYPE gateway_ratelimit_limited_total counter\n");
    for (size_t c = 0; c < rl->n_cls; c++)
        svc_text_printf(&t, "gateway_ratelimit_limited_total{class=\"%s\"} %llu\n",
                        rl->cls[c].def.name, (unsigned long long)st.limited[c]);
    svc_text_printf(&t,
                    "# HELP gateway_ratelimit_evictions_total Buckets forgotten to make room: "
                    "full (no decision changed) or partial (the key got a fresh burst; raise "
                    "GATEWAY_RATE_LIMIT_CAPACITY).\n"
                    "# TYPE gateway_ratelimit_evictions_total counter\n"
                    "gateway_ratelimit_evictions_total{state=\"full\"} %llu\n"
                    "gateway_ratelimit_evictions_total{state=\"partial\"} %llu\n"
                    "# HELP gateway_ratelimit_buckets Token buckets in use.\n"
                    "# TYPE gateway_ratelimit_buckets gauge\ngateway_ratelimit_buckets %llu\n"
                    "# HELP gateway_ratelimit_buckets_max Token buckets at most "
                    "(GATEWAY_RATE_LIMIT_CAPACITY).\n"
                    "# TYPE gateway_ratelimit_buckets_max gauge\n"
                    "gateway_ratelimit_buckets_max %llu\n",
                    (unsigned long long)st.evictions_full, (unsigned long long)st.evictions_partial,
                    (unsigned long long)st.buckets, (unsigned long long)st.capacity);
    return svc_text_end(&t, len);
}
