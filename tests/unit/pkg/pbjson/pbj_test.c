/* SPDX-License-Identifier: Apache-2.0 */
/* pbj_test.c - see pbj_test.h. */
#include <stdlib.h>
#include <string.h>

#include "pbj_test.h"

static void *counting_alloc(void *data, size_t n)
{
    pbjt_alloc_t *a = data;

    a->total++;
    if (a->fail_at != 0 && a->total == a->fail_at)
        return NULL;
    a->live++;
    return malloc(n);
}

static void counting_free(void *data, void *p)
{
    pbjt_alloc_t *a = data;

    assert_non_null(p); /* protobuf-c and pbjson never free NULL */
    assert_true(a->live > 0);
    a->live--;
    free(p);
}

void pbjt_alloc_init(pbjt_alloc_t *a)
{
    memset(a, 0, sizeof(*a));
    a->base.alloc = counting_alloc;
    a->base.free = counting_free;
    a->base.allocator_data = a;
}

void pbjt_encodes(const ProtobufCMessage *m, const char *expected)
{
    pbjt_alloc_t a;
    char errbuf[SVC_ERRBUF_LEN] = "";
    char *out = NULL;
    size_t len = 0;
    svc_err_t err;

    pbjt_alloc_init(&a);
    err = pbj_encode(m, &a.base, &out, &len, errbuf);
    if (err != SVC_OK)
        fail_msg("pbj_encode: %s (%s)", svc_strerror(err), errbuf);
    assert_int_equal(strlen(out), len);
    assert_string_equal(out, expected);
    pbj_free(&a.base, out);
    assert_int_equal(a.live, 0);
}

ProtobufCMessage *pbjt_decode(const ProtobufCMessageDescriptor *d, const char *json)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    ProtobufCMessage *m = NULL;
    svc_err_t err = pbj_decode(d, json, strlen(json), 0, NULL, &m, errbuf);

    if (err != SVC_OK)
        fail_msg("pbj_decode(%s): %s (%s)", json, svc_strerror(err), errbuf);
    assert_non_null(m);
    return m;
}

void pbjt_rejects(const ProtobufCMessageDescriptor *d, const char *json, const char *want)
{
    pbjt_alloc_t a;
    char errbuf[SVC_ERRBUF_LEN] = "";
    ProtobufCMessage *m = NULL;
    svc_err_t err;

    pbjt_alloc_init(&a);
    err = pbj_decode(d, json, strlen(json), 0, &a.base, &m, errbuf);
    if (err != SVC_EINVAL)
        fail_msg("pbj_decode(%s) gave %s, want EINVAL", json, svc_strerror(err));
    assert_null(m);
    assert_int_equal(a.live, 0);
    if (want[0] == '=') {
        assert_string_equal(errbuf, want + 1);
    } else if (strstr(errbuf, want) == NULL) {
        fail_msg("pbj_decode(%s): error \"%s\" lacks \"%s\"", json, errbuf, want);
    }
}

void pbjt_round_trips(const ProtobufCMessageDescriptor *d, const char *json, const char *canonical)
{
    ProtobufCMessage *m = pbjt_decode(d, json);

    pbjt_encodes(m, canonical != NULL ? canonical : json);
    pbj_message_free(m, NULL);
}

size_t pbjt_torture(pbjt_op_fn op, void *ctx)
{
    for (size_t n = 1;; n++) {
        pbjt_alloc_t a;
        svc_err_t err;

        pbjt_alloc_init(&a);
        a.fail_at = n;
        err = op(&a.base, ctx);
        if (err != SVC_OK && err != SVC_ENOMEM)
            fail_msg("allocation %zu failing gave %s", n, svc_strerror(err));
        if (err == SVC_OK) {
            assert_true(a.total < n); /* it succeeded without reaching the failure */
            assert_int_equal(a.live, 0);
            return a.total;
        }
        assert_int_equal(a.live, 0);
    }
}
