/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redact.c - credentials taken out of a value before it is logged: the
 * password of a URL's user:password@, a URL query's password-like
 * parameters, and a libpq key=value connection string's password. The
 * contract is in svc/core.h.
 *
 * Only the secret part is replaced, so that a start-up line still says which
 * host, port, user and database a service was given: that is what an
 * operator reads it for.
 */
#include <string.h>
#include <strings.h>

#include "svc/core.h"

#define REDACTED "(redacted)"

/* Query parameters of a URL whose value is a credential. */
static const char *const query_secrets[] = {
    "password", "sslpassword", "passwd", "token", "access_token", "secret",
    "api_key",  "apikey",      "key",    "sig",   "signature",
};

/* Keywords of a libpq key=value string whose value is a credential. */
static const char *const conninfo_secrets[] = {"password", "sslpassword"};

typedef struct out {
    char *p;
    size_t cap, n;
} out_t;

static void put(out_t *o, const char *s, size_t len)
{
    for (size_t i = 0; i < len && o->n + 1 < o->cap; i++)
        o->p[o->n++] = s[i];
}

static bool listed(const char *const *names, size_t n, const char *s, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(names[i]) == len && strncasecmp(names[i], s, len) == 0)
            return true;
    return false;
}

/* A URI scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ), then "://". */
static size_t scheme_len(const char *s)
{
    size_t i = 0;

    if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
        return 0;
    while (s[i] != '\0' &&
           strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.", s[i]) !=
               NULL)
        i++;
    return strncmp(s + i, "://", 3) == 0 ? i + 3 : 0;
}

static void redact_url(out_t *o, const char *s, size_t scheme)
{
    const char *auth = s + scheme;
    size_t auth_len = strcspn(auth, "/?#");
    const char *at = NULL, *q;

    put(o, s, scheme);
    /* The last '@' of the authority ends the userinfo (a password may hold
     * an unescaped '@'; a host never does). */
    for (size_t i = 0; i < auth_len; i++)
        if (auth[i] == '@')
            at = auth + i;
    if (at != NULL) {
        const char *colon = memchr(auth, ':', (size_t)(at - auth));
        if (colon != NULL) {
            put(o, auth, (size_t)(colon - auth) + 1);
            put(o, REDACTED, strlen(REDACTED));
            put(o, at, auth_len - (size_t)(at - auth));
        } else {
            put(o, auth, auth_len);
        }
    } else {
        put(o, auth, auth_len);
    }
    s = auth + auth_len;
    q = strchr(s, '?');
    if (q == NULL) {
        put(o, s, strlen(s));
        return;
    }
    put(o, s, (size_t)(q - s) + 1);
    for (s = q + 1; *s != '\0' && *s != '#';) {
        size_t len = strcspn(s, "&#"), name = strcspn(s, "=&#");

        if (name < len && listed(query_secrets, SVC_COUNTOF(query_secrets), s, name)) {
            put(o, s, name + 1);
            put(o, REDACTED, strlen(REDACTED));
        } else {
            put(o, s, len);
        }
        s += len;
        if (*s == '&')
            put(o, s++, 1);
    }
    put(o, s, strlen(s));
}

/* libpq's key = value syntax: spaces around '=' allowed, a value single-
 * quoted with backslash escapes or running to the next space. */
static void redact_conninfo(out_t *o, const char *s)
{
    while (*s != '\0') {
        size_t ws = strspn(s, " \t\n\r\f\v"), key, eq, val = 0;
        const char *v;

        put(o, s, ws);
        s += ws;
        key = strcspn(s, "= \t\n\r\f\v");
        v = s + key;
        v += strspn(v, " \t\n\r\f\v");
        if (*v != '=') {
            put(o, s, key == 0 ? 1 : key);
            s += key == 0 ? 1 : key;
            continue;
        }
        v++;
        v += strspn(v, " \t\n\r\f\v");
        eq = (size_t)(v - s);
        if (*v == '\'') {
            val = 1;
            while (v[val] != '\0' && v[val] != '\'')
                val += v[val] == '\\' && v[val + 1] != '\0' ? 2 : 1;
            if (v[val] == '\'')
                val++;
        } else {
            val = strcspn(v, " \t\n\r\f\v");
        }
        put(o, s, eq);
        if (listed(conninfo_secrets, SVC_COUNTOF(conninfo_secrets), s, key))
            put(o, REDACTED, strlen(REDACTED));
        else
            put(o, v, val);
        s = v + val;
    }
}

void svc_redact_credentials(const char *value, char *out, size_t cap)
{
    out_t o = {.p = out, .cap = cap, .n = 0};
    size_t scheme;

    if (cap == 0)
        return;
    if (value == NULL)
        value = "";
    scheme = scheme_len(value);
    if (scheme > 0)
        redact_url(&o, value, scheme);
    else if (strchr(value, '=') != NULL)
        redact_conninfo(&o, value);
    else
        put(&o, value, strlen(value));
    out[o.n] = '\0';
}
