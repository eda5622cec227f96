/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stale_cache.c - a bounded, shared store of recent answers (stale_cache.h):
 * a chained hash table of immutable, reference-counted entries, plus a list
 * in the order they were stored, newest first, from which both eviction
 * and expiry take their victims.
 */
#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "stale_cache.h"

typedef struct gw_cache_entry {
    struct gw_cache_entry *hnext;         /* bucket chain; the free list once dead */
    struct gw_cache_entry *newer, *older; /* the age list */
    uint64_t hash;
    uint64_t stored_ns; /* stored or refreshed: the age list is in this order */
    size_t key_len, body_len;
    uint32_t refs; /* 1 for the table while linked, + 1 per hit held */
    char data[];   /* key, then body */
} entry_t;

/* malloc's own header (16 bytes on glibc x86-64) is part of the overhead. */
static_assert(sizeof(entry_t) + 16 <= GW_CACHE_ENTRY_OVERHEAD, "GW_CACHE_ENTRY_OVERHEAD");

struct gw_cache {
    pthread_mutex_t mu;
    /* options: read-only after gw_cache_new */
    uint64_t max_age_ns;
    size_t max_entries, max_bytes, max_entry_bytes;
    const svc_clock_t *clock;
    uint64_t seed;
    size_t mask; /* buckets - 1 */
    /* under mu */
    entry_t **buckets;
    entry_t *newest, *oldest;
    size_t n, bytes;
    uint64_t evictions, expired;
};

void gw_cache_opts_init(gw_cache_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->max_age_ms = GW_CACHE_DEFAULT_MAX_AGE_MS;
    o->max_entries = GW_CACHE_DEFAULT_MAX_ENTRIES;
    o->max_bytes = GW_CACHE_DEFAULT_MAX_BYTES;
}

svc_err_t gw_cache_new(const gw_cache_opts_t *o, gw_cache_t **out)
{
    gw_cache_t *c;
    size_t buckets = 1;

    *out = NULL;
    if (o->max_age_ms < 1 || o->max_age_ms > UINT64_MAX / SVC_NS_PER_MS || o->max_entries < 1 ||
        o->max_entries > ((size_t)1 << 24) || o->max_bytes < 8 * GW_CACHE_ENTRY_OVERHEAD)
        return SVC_EINVAL;
    c = calloc(1, sizeof *c);
    if (c == NULL)
        return SVC_ENOMEM;
    /* About one entry per bucket when full: chains stay short, and the
     * table costs 8 bytes per entry allowed. */
    while (buckets < o->max_entries)
        buckets <<= 1;
    c->buckets = calloc(buckets, sizeof *c->buckets);
    if (c->buckets == NULL) {
        free(c);
        return SVC_ENOMEM;
    }
    c->mask = buckets - 1;
    c->max_age_ns = o->max_age_ms * SVC_NS_PER_MS;
    c->max_entries = o->max_entries;
    c->max_bytes = o->max_bytes;
    c->max_entry_bytes = o->max_bytes / 8;
    c->clock = o->clock;
    /* Keys come from clients: a per-process seed keeps them from choosing
     * keys that share a bucket. */
    if (getrandom(&c->seed, sizeof c->seed, GRND_NONBLOCK) != (ssize_t)sizeof c->seed)
        c->seed = svc_now_ns() ^ (uint64_t)(uintptr_t)c;
    pthread_mutex_init(&c->mu, NULL);
    *out = c;
    return SVC_OK;
}

void gw_cache_free(gw_cache_t *c)
{
    if (c == NULL)
        return;
    for (entry_t *e = c->newest, *next; e != NULL; e = next) {
        next = e->older;
        free(e);
    }
    free(c->buckets);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* ------------------------------------------------------------------------
 * Keys
 * ------------------------------------------------------------------------ */

typedef struct kbuf {
    char *p;
    size_t cap, n;
    bool full;
} kbuf_t;

static void kput(kbuf_t *b, char ch)
{
    if (b->n + 1 < b->cap)
        b->p[b->n++] = ch;
    else
        b->full = true;
}

static void kputs(kbuf_t *b, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        kput(b, s[i]);
}

static bool is_unreserved(unsigned char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '.' || ch == '_' || ch == '~';
}

static int hex_value(unsigned char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

static void kput_encoded(kbuf_t *b, unsigned char ch)
{
    static const char hex[] = "0123456789ABCDEF";

    if (is_unreserved(ch)) {
        kput(b, (char)ch);
        return;
    }
    kput(b, '%');
    kput(b, hex[ch >> 4]);
    kput(b, hex[ch & 15]);
}

/* A %XX at s[i] (i < len): its byte, or -1. */
static int escape_at(const char *s, size_t len, size_t i)
{
    int hi, lo;

    if (s[i] != '%' || i + 2 >= len)
        return -1;
    hi = hex_value((unsigned char)s[i + 1]);
    lo = hex_value((unsigned char)s[i + 2]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* RFC 3986 §6.2.2: decode what was needlessly encoded, upper-case the
 * rest; everything else stays as it came. */
static void put_path(kbuf_t *b, const char *path, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        int v = path[i] == '%' ? escape_at(path, len, i) : -1;
        if (v < 0) {
            kput(b, path[i]);
        } else if (is_unreserved((unsigned char)v)) {
            kput(b, (char)v);
            i += 2;
        } else {
            kput_encoded(b, (unsigned char)v);
            i += 2;
        }
    }
}

/* One query component (name or value) decoded as url.QueryUnescape does
 * and re-encoded one way; false on a malformed escape. */
static bool put_component(kbuf_t *b, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '%') {
            int v = escape_at(s, len, i);
            if (v < 0)
                return false;
            ch = (unsigned char)v;
            i += 2;
        } else if (ch == '+') {
            ch = ' ';
        }
        kput_encoded(b, ch);
    }
    return true;
}

typedef struct param {
    size_t off, name_len, len; /* in the scratch buffer: name_len of len is the name */
} param_t;

size_t gw_cache_key(const char *method, size_t method_len, const char *path, size_t path_len,
                    const char *query, size_t query_len, char *out, size_t cap)
{
    char scratch[GW_CACHE_KEY_MAX];
    kbuf_t b = {out, cap, 0, false}, s = {scratch, sizeof scratch, 0, false};
    param_t params[GW_CACHE_MAX_PARAMS];
    size_t n = 0;

    if (cap == 0)
        return 0;
    kputs(&b, method, method_len);
    kput(&b, ' ');
    put_path(&b, path, path_len);
    for (size_t i = 0; i < query_len;) {
        const char *part = query + i, *amp = memchr(part, '&', query_len - i), *eq;
        size_t part_len = amp != NULL ? (size_t)(amp - part) : query_len - i, name_len;

        i += part_len + 1;
        if (part_len == 0)
            continue;
        if (n == GW_CACHE_MAX_PARAMS)
            return 0;
        eq = memchr(part, '=', part_len);
        name_len = eq != NULL ? (size_t)(eq - part) : part_len;
        params[n].off = s.n;
        if (!put_component(&s, part, name_len))
            return 0;
        params[n].name_len = s.n - params[n].off;
        kput(&s, '=');
        if (eq != NULL && !put_component(&s, eq + 1, part_len - name_len - 1))
            return 0;
        params[n].len = s.n - params[n].off;
        n++;
    }
    if (s.full)
        return 0;
    /* Insertion sort by name: stable, so one name's values keep their order;
     * at most GW_CACHE_MAX_PARAMS of them. */
    for (size_t i = 1; i < n; i++) {
        param_t p = params[i];
        size_t j = i;
        while (j > 0) {
            const param_t *q = &params[j - 1];
            size_t m = q->name_len < p.name_len ? q->name_len : p.name_len;
            int cmp = memcmp(scratch + q->off, scratch + p.off, m);
            if (cmp < 0 || (cmp == 0 && q->name_len <= p.name_len))
                break;
            params[j] = params[j - 1];
            j--;
        }
        params[j] = p;
    }
    for (size_t i = 0; i < n; i++) {
        kput(&b, i == 0 ? '?' : '&');
        kputs(&b, scratch + params[i].off, params[i].len);
    }
    if (b.full)
        return 0;
    out[b.n] = '\0';
    return b.n;
}

/* ------------------------------------------------------------------------
 * The table
 * ------------------------------------------------------------------------ */

static uint64_t hash_of(const gw_cache_t *c, const char *key, size_t len)
{
    /* FNV-1a over the seed and the key, then a final mix (murmur3's), so
     * that the low bits, which pick the bucket, depend on every byte. */
    uint64_t h = UINT64_C(0xcbf29ce484222325) ^ c->seed;

    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)key[i];
        h *= UINT64_C(0x100000001b3);
    }
    h ^= h >> 33;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    return h;
}

static size_t cost_of(size_t key_len, size_t body_len)
{
    return GW_CACHE_ENTRY_OVERHEAD + key_len + body_len;
}

static entry_t *find(const gw_cache_t *c, uint64_t h, const char *key, size_t len)
{
    for (entry_t *e = c->buckets[h & c->mask]; e != NULL; e = e->hnext)
        if (e->hash == h && e->key_len == len && memcmp(e->data, key, len) == 0)
            return e;
    return NULL;
}

static void list_remove(gw_cache_t *c, entry_t *e)
{
    if (e->newer != NULL)
        e->newer->older = e->older;
    else
        c->newest = e->older;
    if (e->older != NULL)
        e->older->newer = e->newer;
    else
        c->oldest = e->newer;
    e->newer = e->older = NULL;
}

static void list_push_newest(gw_cache_t *c, entry_t *e)
{
    e->newer = NULL;
    e->older = c->newest;
    if (c->newest != NULL)
        c->newest->newer = e;
    else
        c->oldest = e;
    c->newest = e;
}

/* Takes e out of the table (under mu). When no hit holds it any more it
 * goes onto *dead, to be freed once the lock is released. */
static void unlink_entry(gw_cache_t *c, entry_t *e, entry_t **dead)
{
    entry_t **pp = &c->buckets[e->hash & c->mask];

    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    list_remove(c, e);
    c->n--;
    c->bytes -= cost_of(e->key_len, e->body_len);
    e->hnext = NULL;
    if (--e->refs == 0) {
        e->hnext = *dead;
        *dead = e;
    }
}

static void free_dead(entry_t *dead)
{
    while (dead != NULL) {
        entry_t *next = dead->hnext;
        free(dead);
        dead = next;
    }
}

static bool too_old(const gw_cache_t *c, const entry_t *e, uint64_t now)
{
    return now > e->stored_ns && now - e->stored_ns > c->max_age_ns;
}

bool gw_cache_put(gw_cache_t *c, const char *key, size_t key_len, const char *body, size_t body_len)
{
    uint64_t h;
    entry_t *e, *fresh, *dead = NULL;

    if (key_len == 0 || key_len > GW_CACHE_KEY_MAX)
        return false;
    h = hash_of(c, key, key_len);
    pthread_mutex_lock(&c->mu);
    e = find(c, h, key, key_len);
    if (cost_of(key_len, body_len) > c->max_entry_bytes) {
        if (e != NULL)
            unlink_entry(c, e, &dead);
        pthread_mutex_unlock(&c->mu);
        free_dead(dead);
        return false;
    }
    /* The usual case in steady state: the same answer again. */
    if (e != NULL && e->body_len == body_len && memcmp(e->data + e->key_len, body, body_len) == 0) {
        e->stored_ns = svc_clock_now(c->clock);
        list_remove(c, e);
        list_push_newest(c, e);
        pthread_mutex_unlock(&c->mu);
        return true;
    }
    pthread_mutex_unlock(&c->mu);

    fresh = malloc(sizeof *fresh + key_len + body_len);
    if (fresh == NULL)
        return false;
    memset(fresh, 0, sizeof *fresh);
    fresh->hash = h;
    fresh->key_len = key_len;
    fresh->body_len = body_len;
    fresh->refs = 1;
    memcpy(fresh->data, key, key_len);
    memcpy(fresh->data + key_len, body, body_len);

    pthread_mutex_lock(&c->mu);
    /* The clock is read under the lock, so that the age list stays in the
     * order of stored_ns and expiry can stop at the first young entry. */
    fresh->stored_ns = svc_clock_now(c->clock);
    e = find(c, h, key, key_len); /* again: another loop may have put it meanwhile */
    if (e != NULL)
        unlink_entry(c, e, &dead);
    fresh->hnext = c->buckets[h & c->mask];
    c->buckets[h & c->mask] = fresh;
    list_push_newest(c, fresh);
    c->n++;
    c->bytes += cost_of(key_len, body_len);
    /* fresh is at most max_bytes / 8, so this ends before it reaches fresh. */
    while ((c->n > c->max_entries || c->bytes > c->max_bytes) && c->oldest != fresh) {
        if (too_old(c, c->oldest, fresh->stored_ns))
            c->expired++;
        else
            c->evictions++;
        unlink_entry(c, c->oldest, &dead);
    }
    pthread_mutex_unlock(&c->mu);
    free_dead(dead);
    return true;
}

bool gw_cache_get(gw_cache_t *c, const char *key, size_t key_len, gw_cache_hit_t *out)
{
    uint64_t h, now;
    entry_t *e, *dead = NULL;

    memset(out, 0, sizeof *out);
    if (key_len == 0 || key_len > GW_CACHE_KEY_MAX)
        return false;
    h = hash_of(c, key, key_len);
    pthread_mutex_lock(&c->mu);
    now = svc_clock_now(c->clock);
    e = find(c, h, key, key_len);
    if (e != NULL && too_old(c, e, now)) {
        c->expired++;
        unlink_entry(c, e, &dead);
        e = NULL;
    }
    if (e != NULL) {
        e->refs++;
        out->body = e->data + e->key_len;
        out->len = e->body_len;
        out->age_ms = now > e->stored_ns ? (now - e->stored_ns) / SVC_NS_PER_MS : 0;
        out->entry_ = e;
    }
    pthread_mutex_unlock(&c->mu);
    free_dead(dead);
    return e != NULL;
}

void gw_cache_release(gw_cache_t *c, gw_cache_hit_t *hit)
{
    entry_t *e = hit->entry_;
    bool last;

    if (e == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    last = --e->refs == 0; /* 0 only when a put or expiry took it out meanwhile */
    pthread_mutex_unlock(&c->mu);
    if (last)
        free(e);
    memset(hit, 0, sizeof *hit);
}

size_t gw_cache_expire(gw_cache_t *c)
{
    entry_t *dead = NULL;
    size_t n = 0;
    uint64_t now;

    pthread_mutex_lock(&c->mu);
    now = svc_clock_now(c->clock);
    while (c->oldest != NULL && too_old(c, c->oldest, now)) {
        unlink_entry(c, c->oldest, &dead);
        n++;
    }
    c->expired += n;
    pthread_mutex_unlock(&c->mu);
    free_dead(dead);
    return n;
}

void gw_cache_stats(gw_cache_t *c, gw_cache_stats_t *out)
{
    pthread_mutex_lock(&c->mu);
    out->entries = c->n;
    out->bytes = c->bytes;
    out->evictions = c->evictions;
    out->expired = c->expired;
    pthread_mutex_unlock(&c->mu);
    out->max_age_ms = c->max_age_ns / SVC_NS_PER_MS;
    out->max_entries = c->max_entries;
    out->max_bytes = c->max_bytes;
}
