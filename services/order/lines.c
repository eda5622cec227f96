/* SPDX-License-Identifier: Apache-2.0 */
/* lines.c - validation, merging, total and fingerprint of an order (lines.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "lines.h"

svc_err_t ord_lines_build(const char *customer_id, ord_item_t *const *items, size_t n_items,
                          ord_line_t lines[ORD_MAX_ITEMS], size_t *n_lines,
                          char field[static ORD_FIELD_PATH_LEN], char errbuf[static SVC_ERRBUF_LEN])
{
    long len = svc_utf8_chars(customer_id);
    size_t n = 0;

    field[0] = '\0';
    if (len < 1 || len > ORD_CUSTOMER_ID_MAX_CHARS) {
        snprintf(field, ORD_FIELD_PATH_LEN, "customer_id");
        svc_errbuf_set(errbuf, "customer_id must be 1-%d characters of UTF-8 text",
                       ORD_CUSTOMER_ID_MAX_CHARS);
        return SVC_EINVAL;
    }
    if (n_items < 1 || n_items > ORD_MAX_ITEMS) {
        snprintf(field, ORD_FIELD_PATH_LEN, "items");
        svc_errbuf_set(errbuf, "items must have 1-%d entries (got %zu)", ORD_MAX_ITEMS, n_items);
        return SVC_EINVAL;
    }
    for (size_t i = 0; i < n_items; i++) {
        const ord_item_t *it = items[i];
        size_t j;

        len = svc_utf8_chars(it->product_id);
        if (len < 1 || len > ORD_PRODUCT_ID_MAX_CHARS) {
            snprintf(field, ORD_FIELD_PATH_LEN, "items[%zu].product_id", i);
            svc_errbuf_set(errbuf, "items[%zu].product_id must be 1-%d characters of UTF-8 text", i,
                           ORD_PRODUCT_ID_MAX_CHARS);
            return SVC_EINVAL;
        }
        if (it->quantity < 1 || it->quantity > ORD_QUANTITY_MAX) {
            snprintf(field, ORD_FIELD_PATH_LEN, "items[%zu].quantity", i);
            svc_errbuf_set(errbuf, "items[%zu].quantity must be 1-%d", i, ORD_QUANTITY_MAX);
            return SVC_EINVAL;
        }
        /* n <= 100, so a linear search beats any index structure. */
        for (j = 0; j < n && strcmp(lines[j].product_id, it->product_id) != 0; j++)
            ;
        if (j == n) {
            lines[n++] = (ord_line_t){it->product_id, it->quantity, -1};
            continue;
        }
        if (lines[j].quantity + it->quantity > ORD_QUANTITY_MAX) {
            snprintf(field, ORD_FIELD_PATH_LEN, "items[%zu].quantity", i);
            svc_errbuf_set(errbuf,
                           "items[%zu].quantity brings product %s to %" PRId32
                           "; at most %d per product (items of one product are added up)",
                           i, it->product_id, lines[j].quantity + it->quantity, ORD_QUANTITY_MAX);
            return SVC_EINVAL;
        }
        lines[j].quantity += it->quantity;
    }
    *n_lines = n;
    return SVC_OK;
}

svc_err_t ord_lines_total(const ord_line_t *lines, size_t n, int64_t *total,
                          char errbuf[static SVC_ERRBUF_LEN])
{
    int64_t sum = 0, line;

    for (size_t i = 0; i < n; i++) {
        if (lines[i].unit_price_cents < 0) {
            svc_errbuf_set(errbuf, "product %s has no valid price", lines[i].product_id);
            return SVC_EINTERNAL;
        }
        if (__builtin_mul_overflow((int64_t)lines[i].quantity, lines[i].unit_price_cents, &line) ||
            __builtin_add_overflow(sum, line, &sum)) {
            svc_errbuf_set(errbuf, "order total exceeds %" PRId64 " cents", INT64_MAX);
            return SVC_ERANGE;
        }
    }
    *total = sum;
    return SVC_OK;
}

static int by_product(const void *a, const void *b)
{
    const ord_line_t *x = *(const ord_line_t *const *)a, *y = *(const ord_line_t *const *)b;

    return strcmp(x->product_id, y->product_id);
}

/* A length (or count) as 4 big-endian bytes: the prefix that keeps the
 * canonical form unambiguous whatever bytes the strings hold. */
static int put_u32(EVP_MD_CTX *h, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 8), (unsigned char)v};

    return EVP_DigestUpdate(h, b, sizeof b);
}

static int put_str(EVP_MD_CTX *h, const char *s)
{
    size_t len = strlen(s);

    return put_u32(h, (uint32_t)len) && EVP_DigestUpdate(h, s, len);
}

/* The canonical form, fed to h: 1 when every update took. */
static int canonical_form(EVP_MD_CTX *h, const char *customer_id, const ord_line_t *const *sorted,
                          size_t n)
{
    /* A version tag: changing the canonical form later must not make old
     * keys match new requests by accident. */
    int ok = put_str(h, "shopmicro.order.v1.CreateOrder/1") && put_str(h, customer_id) &&
             put_u32(h, (uint32_t)n);

    for (size_t i = 0; ok && i < n; i++)
        ok = put_str(h, sorted[i]->product_id) && put_u32(h, (uint32_t)sorted[i]->quantity);
    return ok;
}

svc_err_t ord_lines_fingerprint(const char *customer_id, const ord_line_t *lines, size_t n,
                                char out[ORD_FINGERPRINT_LEN])
{
    static const char hex[] = "0123456789abcdef";
    const ord_line_t *sorted[ORD_MAX_ITEMS];
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_MD_CTX *h = EVP_MD_CTX_new();
    int ok;

    if (n > ORD_MAX_ITEMS)
        n = ORD_MAX_ITEMS;
    for (size_t i = 0; i < n; i++)
        sorted[i] = &lines[i];
    qsort(sorted, n, sizeof sorted[0], by_product);
    ok = h != NULL && EVP_DigestInit_ex(h, EVP_sha256(), NULL) &&
         canonical_form(h, customer_id, sorted, n) && EVP_DigestFinal_ex(h, digest, &len) &&
         len * 2 + 1 == ORD_FINGERPRINT_LEN;
    EVP_MD_CTX_free(h);
    out[0] = '\0';
    if (!ok)
        return SVC_ENOMEM; /* OpenSSL's only way to fail here is memory */
    for (unsigned int i = 0; i < len; i++) {
        out[2 * i] = hex[digest[i] >> 4];
        out[2 * i + 1] = hex[digest[i] & 0xf];
    }
    out[2 * len] = '\0';
    return SVC_OK;
}
