/* SPDX-License-Identifier: Apache-2.0 */
/* record.c - what every handler reads off a record: a header as text, and
 * its CloudEvents type against the types it knows (kafka/consumer.h). */
#include <stdlib.h>
#include <string.h>

#include "kafka/consumer.h"

bool kfk_record_header(const kfk_record_t *r, const char *name, char *out, size_t len)
{
    const kfk_header_t *h = NULL;

    if (len > 0)
        out[0] = '\0';
    for (size_t i = 0; i < r->n_headers; i++)
        if (strcmp(r->headers[i].name, name) == 0)
            h = &r->headers[i];
    if (h == NULL || h->len == 0 || h->len >= len || memchr(h->value, '\0', h->len) != NULL)
        return false;
    memcpy(out, h->value, h->len);
    out[h->len] = '\0';
    return true;
}

/* Splits "<domain>.v<N>.<Name>": *dom_len, *version, *name (points into t).
 * False when t has no ".v<digits>." part. The last such part counts, so a
 * domain may itself contain dots. */
static bool split_type(const char *t, size_t *dom_len, unsigned long *version, const char **name)
{
    const char *found = NULL;

    for (const char *p = strstr(t, ".v"); p != NULL; p = strstr(p + 1, ".v")) {
        const char *d = p + 2;
        if (*d < '0' || *d > '9')
            continue;
        while (*d >= '0' && *d <= '9')
            d++;
        if (*d == '.' && d[1] != '\0')
            found = p;
    }
    if (found == NULL || found == t)
        return false;
    *dom_len = (size_t)(found - t);
    *version = strtoul(found + 2, (char **)name, 10);
    (*name)++; /* past the '.' */
    return true;
}

kfk_type_match_t kfk_ce_type_match(const char *ce_type, const char *const *known, size_t *index)
{
    size_t dl, kl;
    unsigned long v, kv;
    const char *name, *kname;
    bool newer = false;

    if (ce_type == NULL || !split_type(ce_type, &dl, &v, &name))
        return KFK_TYPE_UNKNOWN;
    for (size_t i = 0; known[i] != NULL; i++) {
        if (strcmp(known[i], ce_type) == 0) {
            if (index != NULL)
                *index = i;
            return KFK_TYPE_KNOWN;
        }
        if (split_type(known[i], &kl, &kv, &kname) && kl == dl &&
            strncmp(known[i], ce_type, dl) == 0 && v > kv)
            newer = true;
    }
    return newer ? KFK_TYPE_NEWER : KFK_TYPE_UNKNOWN;
}
