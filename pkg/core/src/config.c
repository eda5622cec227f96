/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.c - settings from environment variables, described by one table.
 *
 * Validation is strict on purpose: a typo such as CATALOG_WORKERS=4x is an
 * error at start-up, not a silently ignored setting.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "svc/core.h"

static const char *env_default(const char *name)
{
    return getenv(name);
}

static bool parse_int(const char *s, int64_t *out)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0')
        return false;
    *out = v;
    return true;
}

static bool parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};

    for (size_t i = 0; i < SVC_COUNTOF(yes); i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return true;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return true;
        }
    }
    return false;
}

static bool bounded(const svc_cfg_entry_t *e, int64_t v)
{
    return (e->min == 0 && e->max == 0) || (v >= e->min && v <= e->max);
}

static svc_err_t store_str(const svc_cfg_entry_t *e, const char *val, char *field,
                           char errbuf[static SVC_ERRBUF_LEN])
{
    size_t n = strlen(val);

    if (n >= SVC_CFG_STR_MAX || !bounded(e, (int64_t)n)) {
        svc_errbuf_set(errbuf, "%s: length must be %" PRId64 "..%" PRId64, e->env, e->min,
                       e->max > 0 ? e->max : SVC_CFG_STR_MAX - 1);
        return SVC_EINVAL;
    }
    memcpy(field, val, n + 1);
    return SVC_OK;
}

static svc_err_t load_one(const svc_cfg_entry_t *e, const char *val, char *field,
                          char errbuf[static SVC_ERRBUF_LEN])
{
    int64_t iv;
    bool bv;

    switch (e->type) {
    case SVC_CFG_LOG_LEVEL:
        if (strcmp(val, "debug") && strcmp(val, "info") && strcmp(val, "warn") &&
            strcmp(val, "error")) {
            svc_errbuf_set(errbuf, "%s=%s: must be debug, info, warn or error", e->env, val);
            return SVC_EINVAL;
        }
        return store_str(e, val, field, errbuf);
    case SVC_CFG_STR:
        return store_str(e, val, field, errbuf);
    case SVC_CFG_INT:
        if (!parse_int(val, &iv) || !bounded(e, iv)) {
            svc_errbuf_set(errbuf, "%s=%s: must be an integer in %" PRId64 "..%" PRId64, e->env,
                           val, e->min, e->max);
            return SVC_EINVAL;
        }
        memcpy(field, &iv, sizeof iv);
        return SVC_OK;
    case SVC_CFG_BOOL:
        if (!parse_bool(val, &bv)) {
            svc_errbuf_set(errbuf, "%s=%s: must be true or false", e->env, val);
            return SVC_EINVAL;
        }
        memcpy(field, &bv, sizeof bv);
        return SVC_OK;
    }
    svc_errbuf_set(errbuf, "%s: unknown setting type", e->env);
    return SVC_EINTERNAL;
}

svc_err_t svc_cfg_load(const svc_cfg_entry_t *table, size_t n, void *out,
                       const char *(*getenv_fn)(const char *name),
                       char errbuf[static SVC_ERRBUF_LEN])
{
    if (getenv_fn == NULL)
        getenv_fn = env_default;
    for (size_t i = 0; i < n; i++) {
        const svc_cfg_entry_t *e = &table[i];
        const char *val = getenv_fn(e->env);
        svc_err_t err;

        if (val == NULL || val[0] == '\0')
            val = e->def;
        if (val == NULL) {
            svc_errbuf_set(errbuf, "%s is required: %s", e->env, e->help);
            return SVC_EINVAL;
        }
        err = load_one(e, val, (char *)out + e->offset, errbuf);
        if (err != SVC_OK)
            return err;
    }
    return SVC_OK;
}

void svc_cfg_print_help(FILE *f, const svc_cfg_entry_t *table, size_t n)
{
    fprintf(f, "Environment variables:\n");
    for (size_t i = 0; i < n; i++) {
        const svc_cfg_entry_t *e = &table[i];
        fprintf(f, "  %s (default: %s", e->env, e->def != NULL ? e->def : "none, required");
        if (e->type == SVC_CFG_INT && (e->min != 0 || e->max != 0))
            fprintf(f, "; range %" PRId64 "..%" PRId64, e->min, e->max);
        fprintf(f, ")\n      %s\n", e->help);
    }
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);

    return n > k && strcmp(s + n - k, suffix) == 0;
}

/* A password or a secret is never logged, not even in part. */
static bool is_secret(const char *env)
{
    return ends_with(env, "_PASSWORD") || ends_with(env, "_SECRET");
}

void svc_cfg_log(const char *module, const svc_cfg_entry_t *table, size_t n, const void *cfg)
{
    for (size_t i = 0; i < n; i++) {
        const svc_cfg_entry_t *e = &table[i];
        const char *field = (const char *)cfg + e->offset;
        char shown[SVC_CFG_STR_MAX + 64];
        int64_t iv;
        bool bv;

        switch (e->type) {
        case SVC_CFG_STR:
        case SVC_CFG_LOG_LEVEL:
            /* Any string may be a DSN or a URL with credentials in it,
             * whatever its variable is called. */
            if (is_secret(e->env))
                snprintf(shown, sizeof shown, "(redacted)");
            else
                svc_redact_credentials(field, shown, sizeof shown);
            svc_log_info(module, "config %s=%s", e->env, shown);
            break;
        case SVC_CFG_INT:
            memcpy(&iv, field, sizeof iv);
            svc_log_info(module, "config %s=%" PRId64, e->env, iv);
            break;
        case SVC_CFG_BOOL:
            memcpy(&bv, field, sizeof bv);
            svc_log_info(module, "config %s=%s", e->env, bv ? "true" : "false");
            break;
        }
    }
}
