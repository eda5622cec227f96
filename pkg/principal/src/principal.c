/* SPDX-License-Identifier: Apache-2.0 */
/* principal.c - the internal plane's principal (contract in principal/principal.h). */
#include <stdio.h>
#include <string.h>

#include "principal/principal.h"

static const struct {
    pr_scope_t bit;
    const char *name;
} scopes[] = {
    {PR_SCOPE_CATALOG_WRITE, "catalog:write"},
    {PR_SCOPE_ORDERS_WRITE, "orders:write"},
    {PR_SCOPE_ORDERS_READ, "orders:read"},
    {PR_SCOPE_ORDERS_ADMIN, "orders:admin"},
};

#define N_SCOPES (sizeof scopes / sizeof scopes[0])

static pr_scopes_t scope_named(const char *s, size_t len)
{
    for (size_t i = 0; i < N_SCOPES; i++)
        if (strlen(scopes[i].name) == len && memcmp(scopes[i].name, s, len) == 0)
            return scopes[i].bit;
    return 0;
}

pr_scopes_t pr_scopes_parse(const char *s, size_t len)
{
    pr_scopes_t set = 0;
    size_t i = 0;

    while (i < len) {
        size_t j = i;
        while (j < len && s[j] != ' ')
            j++;
        set |= scope_named(s + i, j - i);
        i = j + 1;
    }
    return set;
}

size_t pr_scopes_format(pr_scopes_t set, char *out, size_t cap)
{
    size_t n = 0;

    if (cap == 0)
        return 0;
    out[0] = '\0';
    for (size_t i = 0; i < N_SCOPES; i++) {
        if ((set & scopes[i].bit) == 0)
            continue;
        int w = snprintf(out + n, cap - n, "%s%s", n > 0 ? " " : "", scopes[i].name);
        if (w < 0 || (size_t)w >= cap - n) {
            out[n] = '\0'; /* what fits, whole names only */
            break;
        }
        n += (size_t)w;
    }
    return n;
}

const char *pr_scope_name(pr_scope_t scope)
{
    for (size_t i = 0; i < N_SCOPES; i++)
        if (scopes[i].bit == scope)
            return scopes[i].name;
    return "";
}

bool pr_subject_valid(const char *s, size_t len)
{
    if (s == NULL || len == 0 || len > PR_SUBJECT_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && (c == 0 || strchr("-._~:@|+", c) == NULL)) /* strchr finds the NUL too */
            return false;
    }
    return true;
}
