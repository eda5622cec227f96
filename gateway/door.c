/* SPDX-License-Identifier: Apache-2.0 */
/* door.c - the token check and the rate limiter, from the settings (see door.h). */
#include <ctype.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "door.h"

#define LOG_MOD "gateway.auth"

struct gw_door {
    gw_auth_t *auth; /* NULL: no GATEWAY_JWKS_FILE */
    gw_rl_t *rl;     /* NULL: GATEWAY_RATE_LIMITS=off */
    size_t n;
    gw_guard_rule_t *rules; /* one per route */
    _Atomic uint64_t tokens[GW_JWT__ERR_LAST];
    _Atomic uint64_t refused_401, refused_403;
    _Atomic uint64_t reload_failures;
};

static svc_err_t make_auth(gw_door_t *d, const gw_config_t *cfg, char errbuf[static SVC_ERRBUF_LEN])
{
    gw_auth_opts_t o;

    if (cfg->jwks_file[0] == '\0') {
        svc_log_warn(LOG_MOD, "no GATEWAY_JWKS_FILE: no bearer token can be verified, so every "
                              "route that needs one answers 401; only the public reads work");
        return SVC_OK;
    }
    if (cfg->jwt_issuer[0] == '\0') {
        svc_errbuf_set(errbuf, "GATEWAY_JWKS_FILE is set but GATEWAY_JWT_ISSUER is empty: name "
                               "the issuer whose tokens the key set verifies");
        return SVC_EINVAL;
    }
    gw_auth_opts_init(&o);
    o.jwks_file = cfg->jwks_file;
    o.issuer = cfg->jwt_issuer;
    o.audience = cfg->jwt_audience;
    o.leeway_s = (uint32_t)cfg->jwt_leeway_s;
    o.cache_entries = (size_t)cfg->jwt_cache_entries;
    if (gw_auth_new(&o, &d->auth, errbuf) != SVC_OK)
        return SVC_EINVAL;
    svc_log_info(LOG_MOD, "bearer tokens of issuer %s for audience %s, keys from %s",
                 cfg->jwt_issuer, cfg->jwt_audience, cfg->jwks_file);
    return SVC_OK;
}

static svc_err_t make_limiter(gw_door_t *d, const gw_config_t *cfg,
                              char errbuf[static SVC_ERRBUF_LEN])
{
    gw_rl_spec_t spec;
    gw_rl_opts_t o;
    svc_err_t err = gw_rl_spec_parse(cfg->rate_limits, &spec, errbuf);

    if (err != SVC_OK)
        return err;
    if (spec.n == 0) {
        svc_log_warn(LOG_MOD, "GATEWAY_RATE_LIMITS=off: no route is rate limited");
        return SVC_OK;
    }
    gw_rl_opts_init(&o);
    o.spec = &spec;
    o.capacity = (size_t)cfg->rate_limit_capacity;
    err = gw_rl_new(&o, &d->rl);
    if (err != SVC_OK)
        svc_errbuf_set(errbuf, "cannot make the rate limiter: %s", svc_strerror(err));
    return err;
}

/* Each route's rule; a class a route names that the setting lacks is an
 * error: with limits on, no route goes unlimited by a typo. Without public
 * reads every API route needs a token (the health routes never do). */
static svc_err_t make_rules(gw_door_t *d, const gw_route_t *routes, bool public_reads,
                            char errbuf[static SVC_ERRBUF_LEN])
{
    for (size_t i = 0; i < d->n; i++) {
        const char *cls = routes[i].rate_class;

        d->rules[i].scopes = routes[i].scopes;
        d->rules[i].token_required = !public_reads && routes[i].rpc != NULL;
        d->rules[i].rl_class = -1;
        if (d->rl == NULL || cls == NULL)
            continue;
        d->rules[i].rl_class = gw_rl_class_index(d->rl, cls, strlen(cls));
        if (d->rules[i].rl_class < 0) {
            svc_errbuf_set(errbuf,
                           "GATEWAY_RATE_LIMITS has no class \"%s\", which %s %s is in: "
                           "give it a rate, or write %s=off",
                           cls, routes[i].method, routes[i].pattern, cls);
            return SVC_EINVAL;
        }
    }
    return SVC_OK;
}

svc_err_t gw_door_new(const gw_config_t *cfg, const gw_route_t *routes, size_t n, gw_door_t **out,
                      char errbuf[static SVC_ERRBUF_LEN])
{
    gw_door_t *d = calloc(1, sizeof *d);
    svc_err_t err;

    *out = NULL;
    if (d == NULL)
        return SVC_ENOMEM;
    d->n = n;
    d->rules = calloc(n > 0 ? n : 1, sizeof *d->rules);
    err = d->rules == NULL ? SVC_ENOMEM : make_auth(d, cfg, errbuf);
    if (err == SVC_OK)
        err = make_limiter(d, cfg, errbuf);
    if (err == SVC_OK)
        err = make_rules(d, routes, cfg->public_reads, errbuf);
    if (err != SVC_OK) {
        gw_door_free(d);
        return err;
    }
    *out = d;
    return SVC_OK;
}

void gw_door_free(gw_door_t *d)
{
    if (d == NULL)
        return;
    gw_auth_free(d->auth);
    gw_rl_free(d->rl);
    free(d->rules);
    free(d);
}

void gw_door_tick(gw_door_t *d)
{
    int rc;

    if (d == NULL || d->auth == NULL)
        return;
    rc = gw_auth_reload_if_changed(d->auth);
    if (rc < 0)
        atomic_fetch_add_explicit(&d->reload_failures, 1, memory_order_relaxed);
}

svc_err_t gw_door_loop_new(gw_door_t *d, gw_auth_loop_t **out)
{
    *out = NULL;
    return d->auth != NULL ? gw_auth_loop_new(d->auth, out) : SVC_OK;
}

void gw_door_check(gw_door_t *d, gw_auth_loop_t *auth, size_t route, const gw_guard_request_t *rq,
                   gw_guard_verdict_t *v)
{
    static const gw_guard_rule_t open = {0, -1, false};

    gw_guard_check(auth, d->rl, route < d->n ? &d->rules[route] : &open, rq, v);
    if (v->token != GW_JWT_MISSING && (unsigned)v->token < GW_JWT__ERR_LAST)
        atomic_fetch_add_explicit(&d->tokens[v->token], 1, memory_order_relaxed);
    if (v->status == 401)
        atomic_fetch_add_explicit(&d->refused_401, 1, memory_order_relaxed);
    else if (v->status == 403)
        atomic_fetch_add_explicit(&d->refused_403, 1, memory_order_relaxed);
}

/* The metric label of a result: the enum's name in lower case ("valid"
 * for OK), which, unlike the log's text, never has a space. */
static const char *const result_names[] = {
#define XX(name, text) #name,
    GW_JWT_ERR_MAP(XX)
#undef XX
};

static void result_label(gw_jwt_err_t e, char *out, size_t cap)
{
    const char *s = e == GW_JWT_OK ? "valid" : result_names[e];
    size_t i = 0;

    for (; s[i] != '\0' && i + 1 < cap; i++)
        out[i] = (char)tolower((unsigned char)s[i]);
    out[i] = '\0';
}

static uint64_t load(const _Atomic uint64_t *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

svc_err_t gw_door_render(const void *arg, char *buf, size_t cap, size_t *len)
{
    const gw_door_t *d = arg;
    svc_text_t t = svc_text_on(buf, cap);
    char label[32];

    svc_text_printf(&t, "# HELP gateway_auth_tokens_total Bearer tokens checked, by result: "
                        "valid, or why one was refused.\n"
                        "# TYPE gateway_auth_tokens_total counter\n");
    for (gw_jwt_err_t e = GW_JWT_OK; e < GW_JWT__ERR_LAST; e++) {
        if (e == GW_JWT_MISSING)
            continue;
        result_label(e, label, sizeof label);
        svc_text_printf(&t, "gateway_auth_tokens_total{result=\"%s\"} %llu\n", label,
                        (unsigned long long)load(&d->tokens[e]));
    }
    svc_text_printf(&t,
                    "# HELP gateway_auth_refused_total Requests refused for their token or "
                    "its scopes.\n# TYPE gateway_auth_refused_total counter\n"
                    "gateway_auth_refused_total{status=\"401\"} %llu\n"
                    "gateway_auth_refused_total{status=\"403\"} %llu\n",
                    (unsigned long long)load(&d->refused_401),
                    (unsigned long long)load(&d->refused_403));
    svc_text_printf(&t,
                    "# HELP gateway_auth_keyset_generation The key set in use: bumped by "
                    "every reload, 0 without a key set file.\n"
                    "# TYPE gateway_auth_keyset_generation gauge\n"
                    "gateway_auth_keyset_generation %llu\n"
                    "# HELP gateway_auth_keyset_reload_failures_total Reloads of a changed "
                    "key set file that failed (the previous set stays in use).\n"
                    "# TYPE gateway_auth_keyset_reload_failures_total counter\n"
                    "gateway_auth_keyset_reload_failures_total %llu\n",
                    /* the holder's own atomic: any thread */
                    (unsigned long long)(d->auth != NULL ? gw_auth_generation(d->auth) : 0),
                    (unsigned long long)load(&d->reload_failures));
    return svc_text_end(&t, len);
}

const gw_rl_t *gw_door_ratelimit(const gw_door_t *d)
{
    return d->rl;
}
