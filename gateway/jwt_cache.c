/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jwt_cache.c - the verified-token cache (see jwt_cache.h). A set is picked
 * by the first 8 bytes of the SHA-256, which are as uniform as any hash
 * could make them; the whole 32 bytes are compared.
 */
#include <stdlib.h>
#include <string.h>

#include "jwt_cache.h"

typedef struct entry {
    uint8_t key[GW_JWT_CACHE_KEY_LEN];
    uint64_t used; /* 0: empty; else the tick of the last get or put */
    gw_principal_t p;
} entry_t;

struct gw_jwt_cache {
    size_t n_sets; /* a power of two */
    uint64_t tick;
    gw_jwt_cache_stats_t st;
    entry_t *e; /* n_sets * GW_JWT_CACHE_WAYS */
};

svc_err_t gw_jwt_cache_new(size_t entries, gw_jwt_cache_t **out)
{
    gw_jwt_cache_t *c;
    size_t sets = 1;

    if (entries == 0 || entries > GW_JWT_CACHE_MAX_ENTRIES)
        return SVC_EINVAL;
    while (sets * GW_JWT_CACHE_WAYS < entries)
        sets *= 2;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return SVC_ENOMEM;
    c->e = calloc(sets * GW_JWT_CACHE_WAYS, sizeof(entry_t));
    if (c->e == NULL) {
        free(c);
        return SVC_ENOMEM;
    }
    c->n_sets = sets;
    *out = c;
    return SVC_OK;
}

void gw_jwt_cache_free(gw_jwt_cache_t *c)
{
    if (c == NULL)
        return;
    free(c->e);
    free(c);
}

size_t gw_jwt_cache_capacity(const gw_jwt_cache_t *c)
{
    return c->n_sets * GW_JWT_CACHE_WAYS;
}

static entry_t *set_of(gw_jwt_cache_t *c, const uint8_t *key)
{
    uint64_t h;

    memcpy(&h, key, sizeof(h));
    return &c->e[(h & (c->n_sets - 1)) * GW_JWT_CACHE_WAYS];
}

bool gw_jwt_cache_get(gw_jwt_cache_t *c, const uint8_t key[GW_JWT_CACHE_KEY_LEN], int64_t now_s,
                      uint32_t leeway_s, gw_principal_t *out)
{
    entry_t *set = set_of(c, key);

    for (int w = 0; w < GW_JWT_CACHE_WAYS; w++) {
        entry_t *e = &set[w];
        if (e->used == 0 || memcmp(e->key, key, GW_JWT_CACHE_KEY_LEN) != 0)
            continue;
        if (!gw_jwt_still_valid(&e->p, now_s, leeway_s)) {
            e->used = 0;
            c->st.expired++;
            c->st.misses++;
            return false;
        }
        e->used = ++c->tick;
        *out = e->p;
        c->st.hits++;
        return true;
    }
    c->st.misses++;
    return false;
}

void gw_jwt_cache_put(gw_jwt_cache_t *c, const uint8_t key[GW_JWT_CACHE_KEY_LEN],
                      const gw_principal_t *p)
{
    entry_t *set = set_of(c, key), *victim = &set[0];

    for (int w = 0; w < GW_JWT_CACHE_WAYS; w++) {
        entry_t *e = &set[w];
        if (e->used != 0 && memcmp(e->key, key, GW_JWT_CACHE_KEY_LEN) == 0) {
            victim = e;
            break;
        }
        if (e->used < victim->used)
            victim = e;
    }
    if (victim->used != 0 && memcmp(victim->key, key, GW_JWT_CACHE_KEY_LEN) != 0)
        c->st.evictions++;
    memcpy(victim->key, key, GW_JWT_CACHE_KEY_LEN);
    victim->p = *p;
    victim->used = ++c->tick;
}

void gw_jwt_cache_clear(gw_jwt_cache_t *c)
{
    memset(c->e, 0, c->n_sets * GW_JWT_CACHE_WAYS * sizeof(entry_t));
    c->st.flushes++;
}

void gw_jwt_cache_stats(const gw_jwt_cache_t *c, gw_jwt_cache_stats_t *out)
{
    *out = c->st;
}
