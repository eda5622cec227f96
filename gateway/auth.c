/* SPDX-License-Identifier: Apache-2.0 */
/*
 * auth.c - the key-set holder, its reload, and the per-loop verify with a
 * cache (see auth.h for who owns what).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#include "auth.h"

#define MOD "gateway.auth"

/* What identifies one version of the file. */
typedef struct file_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    bool valid;   /* false: nothing recorded */
    bool missing; /* stat failed (the other fields are 0) */
} file_id_t;

struct gw_auth {
    char *jwks_file, *issuer, *audience;
    gw_jwt_opts_t jwt;
    size_t cache_entries;
    pthread_mutex_t mu;          /* guards current; taken by reload and by a loop's handover */
    gw_jwks_t *current;          /* one reference held by the holder */
    _Atomic uint64_t generation; /* written under mu, read by loops without it */
    file_id_t loaded, refused;   /* main thread only */
};

struct gw_auth_loop {
    gw_auth_t *a;
    gw_jwks_t *set;      /* this loop's reference */
    uint64_t generation; /* of set */
    gw_jwt_cache_t *cache;
    EVP_MD *sha256; /* fetched once: a fetch per digest costs more than the digest */
    EVP_MD_CTX *md;
};

void gw_auth_opts_init(gw_auth_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->leeway_s = GW_JWT_DEFAULT_LEEWAY_S;
    o->cache_entries = GW_AUTH_DEFAULT_CACHE_ENTRIES;
}

static bool stat_file(const char *path, file_id_t *id, char errbuf[static SVC_ERRBUF_LEN])
{
    struct stat st;

    if (stat(path, &st) != 0) {
        svc_errbuf_set(errbuf, "stat %s: %s", path, strerror(errno));
        return false;
    }
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    id->size = st.st_size;
    id->mtime = st.st_mtim;
    id->valid = true;
    return true;
}

static bool same_file(const file_id_t *x, const file_id_t *y)
{
    return x->valid && y->valid && x->missing == y->missing && x->dev == y->dev &&
           x->ino == y->ino && x->size == y->size && x->mtime.tv_sec == y->mtime.tv_sec &&
           x->mtime.tv_nsec == y->mtime.tv_nsec;
}

void gw_auth_free(gw_auth_t *a)
{
    if (a == NULL)
        return;
    gw_jwks_release(a->current);
    pthread_mutex_destroy(&a->mu);
    free(a->jwks_file);
    free(a->issuer);
    free(a->audience);
    free(a);
}

svc_err_t gw_auth_new(const gw_auth_opts_t *o, gw_auth_t **out, char errbuf[static SVC_ERRBUF_LEN])
{
    gw_auth_t *a = NULL;
    svc_err_t err = SVC_EINVAL;

    if (o->jwks_file == NULL || o->jwks_file[0] == '\0') {
        svc_errbuf_set(errbuf, "JWKS file is not set");
        goto out;
    }
    if (o->cache_entries > GW_JWT_CACHE_MAX_ENTRIES) {
        svc_errbuf_set(errbuf, "JWT cache of %zu entries, more than %u", o->cache_entries,
                       GW_JWT_CACHE_MAX_ENTRIES);
        goto out;
    }
    a = calloc(1, sizeof(*a));
    if (a == NULL) {
        err = SVC_ENOMEM;
        goto out;
    }
    pthread_mutex_init(&a->mu, NULL);
    a->jwks_file = strdup(o->jwks_file);
    a->issuer = o->issuer != NULL ? strdup(o->issuer) : NULL;
    a->audience = o->audience != NULL ? strdup(o->audience) : NULL;
    if (a->jwks_file == NULL || (o->issuer != NULL && a->issuer == NULL) ||
        (o->audience != NULL && a->audience == NULL)) {
        err = SVC_ENOMEM;
        goto out;
    }
    gw_jwt_opts_init(&a->jwt);
    a->jwt.issuer = a->issuer;
    a->jwt.audience = a->audience;
    a->jwt.leeway_s = o->leeway_s;
    a->jwt.wall_clock = o->wall_clock;
    a->cache_entries = o->cache_entries;
    if ((err = gw_jwt_opts_check(&a->jwt, errbuf)) != SVC_OK)
        goto out;
    /* stat before the read: a file replaced in between is then seen as
     * changed at the first reload and read again, never the other way. */
    if (!stat_file(a->jwks_file, &a->loaded, errbuf)) {
        err = SVC_EINVAL;
        goto out;
    }
    if ((err = gw_jwks_load_file(a->jwks_file, &a->current, errbuf)) != SVC_OK)
        goto out;
    atomic_init(&a->generation, 1);
    *out = a;
    a = NULL;
out:
    gw_auth_free(a);
    return err;
}

int gw_auth_reload_if_changed(gw_auth_t *a)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    char kv[SVC_ERRBUF_LEN + 64];
    file_id_t now = {0};
    gw_jwks_t *set = NULL, *old;
    svc_err_t err = SVC_EINVAL;

    if (!stat_file(a->jwks_file, &now, errbuf)) {
        /* A missing file is one "version": logged once until it changes. */
        now.valid = true;
        now.missing = true;
    } else if (same_file(&now, &a->loaded)) {
        return 0;
    }
    if (same_file(&now, &a->refused))
        return -1;
    if (!now.missing)
        err = gw_jwks_load_file(a->jwks_file, &set, errbuf);
    if (err != SVC_OK) {
        a->refused = now;
        /* svc_log_write does not look at the level (the SVC_LOG macros do,
         * but take no kv): the check is made here. */
        if (svc_log_enabled(SVC_LOG_ERROR)) {
            snprintf(kv, sizeof(kv), " file=%s keys_kept=%zu", a->jwks_file,
                     gw_jwks_count(a->current));
            svc_log_write(SVC_LOG_ERROR, MOD, kv,
                          "JWKS reload refused, the previous key set stays in use: %s", errbuf);
        }
        return -1;
    }
    pthread_mutex_lock(&a->mu);
    old = a->current;
    a->current = set;
    atomic_fetch_add_explicit(&a->generation, 1, memory_order_release);
    pthread_mutex_unlock(&a->mu);
    gw_jwks_release(old);
    a->loaded = now;
    a->refused.valid = false;
    if (svc_log_enabled(SVC_LOG_INFO)) {
        snprintf(kv, sizeof(kv), " file=%s keys=%zu generation=%llu", a->jwks_file,
                 gw_jwks_count(set), (unsigned long long)gw_auth_generation(a));
        svc_log_write(SVC_LOG_INFO, MOD, kv, "JWKS reloaded");
    }
    return 1;
}

uint64_t gw_auth_generation(const gw_auth_t *a)
{
    return atomic_load_explicit(&a->generation, memory_order_acquire);
}

const gw_jwt_opts_t *gw_auth_jwt_opts(const gw_auth_t *a)
{
    return &a->jwt;
}

/* Takes the holder's current set (a loop's handover, see auth.h). */
static void take_current(gw_auth_loop_t *l)
{
    gw_jwks_t *old = l->set;

    pthread_mutex_lock(&l->a->mu);
    l->set = gw_jwks_retain(l->a->current);
    l->generation = atomic_load_explicit(&l->a->generation, memory_order_relaxed);
    pthread_mutex_unlock(&l->a->mu);
    gw_jwks_release(old);
    if (l->cache != NULL)
        gw_jwt_cache_clear(l->cache);
}

void gw_auth_loop_free(gw_auth_loop_t *l)
{
    if (l == NULL)
        return;
    gw_jwks_release(l->set);
    gw_jwt_cache_free(l->cache);
    EVP_MD_CTX_free(l->md);
    EVP_MD_free(l->sha256);
    free(l);
}

svc_err_t gw_auth_loop_new(gw_auth_t *a, gw_auth_loop_t **out)
{
    gw_auth_loop_t *l = calloc(1, sizeof(*l));
    svc_err_t err = SVC_ENOMEM;

    if (l == NULL)
        return SVC_ENOMEM;
    l->a = a;
    if (a->cache_entries > 0) {
        if ((err = gw_jwt_cache_new(a->cache_entries, &l->cache)) != SVC_OK)
            goto out;
        err = SVC_ENOMEM;
        if ((l->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL)) == NULL ||
            (l->md = EVP_MD_CTX_new()) == NULL)
            goto out;
    }
    take_current(l);
    *out = l;
    l = NULL;
    err = SVC_OK;
out:
    gw_auth_loop_free(l);
    return err;
}

gw_jwt_err_t gw_auth_verify(gw_auth_loop_t *l, const char *token, size_t len, gw_principal_t *out)
{
    uint8_t key[GW_JWT_CACHE_KEY_LEN];
    const gw_jwt_opts_t *o = &l->a->jwt;
    unsigned key_len = 0;
    bool keyed = false;
    gw_jwt_err_t err;
    int64_t now;

    if (atomic_load_explicit(&l->a->generation, memory_order_acquire) != l->generation)
        take_current(l);
    if (len == 0)
        return GW_JWT_MISSING;
    /* Checked before hashing: the cap bounds the digest's cost too. */
    if (len > GW_JWT_MAX_TOKEN)
        return GW_JWT_TOO_LONG;
    if (l->cache != NULL) {
        keyed = EVP_DigestInit_ex(l->md, l->sha256, NULL) == 1 &&
                EVP_DigestUpdate(l->md, token, len) == 1 &&
                EVP_DigestFinal_ex(l->md, key, &key_len) == 1 && key_len == sizeof(key);
        now = gw_jwt_now_s(o);
        if (keyed && gw_jwt_cache_get(l->cache, key, now, o->leeway_s, out))
            return GW_JWT_OK;
    }
    err = gw_jwt_verify(l->set, o, token, len, out);
    if (err == GW_JWT_OK && keyed)
        gw_jwt_cache_put(l->cache, key, out);
    return err;
}

void gw_auth_loop_cache_stats(const gw_auth_loop_t *l, gw_jwt_cache_stats_t *out)
{
    if (l->cache != NULL)
        gw_jwt_cache_stats(l->cache, out);
    else
        memset(out, 0, sizeof(*out));
}

gw_jwt_err_t gw_auth_bearer_token(const char *value, size_t len, const char **token,
                                  size_t *token_len)
{
    size_t i = 6;

    if (len < 6 || strncasecmp(value, "Bearer", 6) != 0 || (len > 6 && value[6] != ' '))
        return GW_JWT_MISSING;
    while (i < len && value[i] == ' ')
        i++;
    /* Trailing white space is not part of a b64token. */
    while (len > i && (value[len - 1] == ' ' || value[len - 1] == '\t'))
        len--;
    if (i == len)
        return GW_JWT_MALFORMED;
    *token = value + i;
    *token_len = len - i;
    return GW_JWT_OK;
}
