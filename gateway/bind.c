/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bind.c - HTTP request -> gRPC request message, through pkg/pbjson only.
 */
#include <stdlib.h>
#include <string.h>

#include "bind.h"
#include "pbj/pbjson.h"

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

bool gw_percent_decode(const char *src, size_t len, bool plus_is_space, char *dst, size_t *dst_len)
{
    size_t n = 0;

    for (size_t i = 0; i < len; i++) {
        if (src[i] == '%') {
            int hi = i + 2 < len ? hexval(src[i + 1]) : -1;
            int lo = i + 2 < len ? hexval(src[i + 2]) : -1;
            if (hi < 0 || lo < 0) {
                /* Go reports the escape as far as it goes: "%zz", "%4". */
                size_t k = len - i < 3 ? len - i : 3;
                memcpy(dst, src + i, k);
                dst[k] = '\0';
                return false;
            }
            dst[n++] = (char)(hi * 16 + lo);
            i += 2;
        } else if (src[i] == '+' && plus_is_space) {
            dst[n++] = ' ';
        } else {
            dst[n++] = src[i];
        }
    }
    dst[n] = '\0';
    if (dst_len != NULL)
        *dst_len = n;
    return true;
}

/* One decoded query pair; `order` keeps the values of a key in request
 * order through the sort. */
typedef struct qpair {
    pbj_str_t key, value;
    size_t order;
} qpair_t;

static int qpair_cmp(const void *a_, const void *b_)
{
    const qpair_t *a = a_, *b = b_;
    size_t n = a->key.len < b->key.len ? a->key.len : b->key.len;
    int c = memcmp(a->key.ptr, b->key.ptr, n);

    if (c != 0)
        return c;
    if (a->key.len != b->key.len)
        return a->key.len < b->key.len ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

/*
 * Splits and decodes the query (url.ParseQuery), groups the values by key
 * and hands each key to pbj_set_query_param once, with all its values.
 */
static svc_err_t bind_query(ProtobufCMessage *msg, const char *q, size_t len,
                            const char *const *bound, size_t n_bound,
                            char errbuf[static SVC_ERRBUF_LEN])
{
    size_t cap = 1, n = 0;
    qpair_t *pairs = NULL;
    pbj_str_t *values = NULL;
    char *scratch = NULL, *w;
    svc_err_t err = SVC_OK;

    for (size_t i = 0; i < len; i++)
        cap += q[i] == '&';
    pairs = malloc(cap * sizeof *pairs);
    values = malloc(cap * sizeof *values);
    scratch = malloc(len + 2 * cap); /* decoded text is never longer; +NULs */
    if (pairs == NULL || values == NULL || scratch == NULL) {
        err = SVC_ENOMEM;
        goto out;
    }
    w = scratch;
    for (const char *p = q, *end = q + len; p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *stop = amp != NULL ? amp : end, *eq;
        size_t klen, vlen;

        if (memchr(p, ';', (size_t)(stop - p)) != NULL) {
            svc_errbuf_set(errbuf, "invalid semicolon separator in query");
            err = SVC_EINVAL;
            goto out;
        }
        if (stop > p) {
            eq = memchr(p, '=', (size_t)(stop - p));
            klen = (size_t)((eq != NULL ? eq : stop) - p);
            if (!gw_percent_decode(p, klen, true, w, &klen)) {
                svc_errbuf_set(errbuf, "invalid URL escape \"%s\"", w);
                err = SVC_EINVAL;
                goto out;
            }
            pairs[n].key = (pbj_str_t){w, klen};
            w += klen + 1;
            vlen = eq != NULL ? (size_t)(stop - eq - 1) : 0;
            if (!gw_percent_decode(eq != NULL ? eq + 1 : stop, vlen, true, w, &vlen)) {
                svc_errbuf_set(errbuf, "invalid URL escape \"%s\"", w);
                err = SVC_EINVAL;
                goto out;
            }
            pairs[n].value = (pbj_str_t){w, vlen};
            w += vlen + 1;
            pairs[n].order = n;
            n++;
        }
        p = amp != NULL ? amp + 1 : end;
    }
    qsort(pairs, n, sizeof *pairs, qpair_cmp);
    for (size_t i = 0; i < n;) {
        size_t j = i, k = 0;
        while (j < n && pairs[j].key.len == pairs[i].key.len &&
               memcmp(pairs[j].key.ptr, pairs[i].key.ptr, pairs[i].key.len) == 0)
            values[k++] = pairs[j++].value;
        err = pbj_set_query_param(msg, NULL, pairs[i].key, values, k, bound, n_bound, errbuf);
        if (err != SVC_OK)
            goto out;
        i = j;
    }
out:
    free(pairs);
    free(values);
    free(scratch);
    return err;
}

svc_err_t gw_bind_request(const gw_match_t *m, const char *query, size_t query_len,
                          const char *body, size_t body_len, ProtobufCMessage **out,
                          char errbuf[static SVC_ERRBUF_LEN])
{
    const gw_route_t *r = m->route;
    char fields[GW_MAX_PATH_VARS][GW_MAX_FIELD_PATH + 1];
    const char *bound[GW_MAX_PATH_VARS];
    ProtobufCMessage *msg = NULL;
    char *value = NULL;
    svc_err_t err;

    if (r->body == GW_BODY_ALL)
        err = pbj_decode(r->request, body != NULL ? body : "", body_len, PBJ_DECODE_ALLOW_EMPTY,
                         NULL, &msg, errbuf);
    else
        err = pbj_message_new(r->request, NULL, &msg);
    if (err != SVC_OK)
        goto out;
    for (size_t i = 0; i < m->n_vars; i++) {
        const gw_path_var_t *v = &m->vars[i];
        size_t vlen;

        if (v->field_len > GW_MAX_FIELD_PATH) {
            err = SVC_EINTERNAL;
            svc_errbuf_set(errbuf, "route variable name too long");
            goto out;
        }
        memcpy(fields[i], v->field, v->field_len);
        fields[i][v->field_len] = '\0';
        bound[i] = fields[i];
        free(value);
        value = malloc(v->value_len + 4);
        if (value == NULL) {
            err = SVC_ENOMEM;
            goto out;
        }
        if (!gw_percent_decode(v->value, v->value_len, false, value, &vlen)) {
            svc_errbuf_set(errbuf, "malformed path escape \"%s\"", value);
            err = SVC_EINVAL;
            goto out;
        }
        err = pbj_set_path_param(msg, NULL, fields[i], (pbj_str_t){value, vlen}, errbuf);
        if (err != SVC_OK)
            goto out;
    }
    if (r->body == GW_BODY_NONE && query != NULL && query_len > 0)
        err = bind_query(msg, query, query_len, bound, m->n_vars, errbuf);
out:
    free(value);
    if (err != SVC_OK) {
        pbj_message_free(msg, NULL);
        return err;
    }
    *out = msg;
    return SVC_OK;
}
