/* SPDX-License-Identifier: Apache-2.0 */
/* test_webhook.c - pkg/webhook: the Standard Webhooks test vector, and every
 * way a delivery may be tampered with. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>

#include <cmocka.h>

#include "webhook/webhook.h"

/* The signing vector of the Standard Webhooks reference libraries
 * (standard-webhooks/standard-webhooks, libraries/go/webhook_test.go,
 * TestWebhookSign). */
#define VEC_SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define VEC_ID     "msg_p5jXN8AQM9LWM0D4loKWxJek"
#define VEC_TS     1614265330
#define VEC_BODY   "{\"test\": 2432232314}"
#define VEC_SIG    "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

static whk_key_t vec_key(void)
{
    whk_key_t k;

    assert_int_equal(whk_key_parse(VEC_SECRET, &k, SVC_ERRBUF_SCRATCH), SVC_OK);
    return k;
}

static whk_verdict_t verify(const whk_key_t *k, const char *id, const char *ts, const char *sig,
                            const char *body, int64_t now)
{
    return whk_verify(k, id, ts, sig, body, strlen(body), now, WHK_DEFAULT_TOLERANCE_S);
}

static void the_spec_vector(void **state)
{
    whk_key_t k = vec_key(), bare;
    char sig[WHK_SIGNATURE_LEN];

    (void)state;
    assert_int_equal(whk_sign(&k, VEC_ID, VEC_TS, VEC_BODY, strlen(VEC_BODY), sig), SVC_OK);
    assert_string_equal(sig, VEC_SIG);
    /* the prefix is optional */
    assert_int_equal(whk_key_parse(VEC_SECRET + strlen("whsec_"), &bare, SVC_ERRBUF_SCRATCH),
                     SVC_OK);
    assert_int_equal(bare.len, k.len);
    assert_memory_equal(bare.bytes, k.bytes, k.len);
    assert_int_equal(verify(&k, VEC_ID, "1614265330", VEC_SIG, VEC_BODY, VEC_TS), WHK_VALID);
}

static void headers_are_ready_lines(void **state)
{
    whk_key_t k = vec_key();
    whk_headers_t h;

    (void)state;
    assert_int_equal(whk_headers_make(&k, VEC_ID, VEC_TS, VEC_BODY, strlen(VEC_BODY), &h), SVC_OK);
    assert_string_equal(h.id, "webhook-id: " VEC_ID);
    assert_string_equal(h.timestamp, "webhook-timestamp: 1614265330");
    assert_string_equal(h.signature, "webhook-signature: " VEC_SIG);
}

static void tampering_is_caught(void **state)
{
    whk_key_t k = vec_key(), other;
    const int64_t now = VEC_TS + 10;

    (void)state;
    assert_int_equal(verify(&k, VEC_ID, "1614265330", VEC_SIG, "{\"test\": 2432232315}", now),
                     WHK_BAD_SIGNATURE);
    assert_int_equal(verify(&k, "msg_other", "1614265330", VEC_SIG, VEC_BODY, now),
                     WHK_BAD_SIGNATURE);
    assert_int_equal(verify(&k, VEC_ID, "1614265331", VEC_SIG, VEC_BODY, now), WHK_BAD_SIGNATURE);
    assert_int_equal(verify(&k, VEC_ID, "1614265330",
                            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OF=", VEC_BODY, now),
                     WHK_BAD_SIGNATURE);
    /* the right bytes under another version, or cut short */
    assert_int_equal(verify(&k, VEC_ID, "1614265330",
                            "v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", VEC_BODY, now),
                     WHK_BAD_SIGNATURE);
    assert_int_equal(verify(&k, VEC_ID, "1614265330", "v1,g0hM9SsE", VEC_BODY, now),
                     WHK_BAD_SIGNATURE);
    assert_int_equal(
        whk_key_parse("whsec_c2hvcG1pY3JvLWxvY2FsLWRldi1zZWNyZXQh", &other, SVC_ERRBUF_SCRATCH),
        SVC_OK);
    assert_int_equal(verify(&other, VEC_ID, "1614265330", VEC_SIG, VEC_BODY, now),
                     WHK_BAD_SIGNATURE);
}

static void one_matching_entry_of_several_is_enough(void **state)
{
    whk_key_t k = vec_key();

    (void)state;
    assert_int_equal(verify(&k, VEC_ID, "1614265330",
                            "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= " VEC_SIG
                            " v2,whatever",
                            VEC_BODY, VEC_TS),
                     WHK_VALID);
    assert_int_equal(verify(&k, VEC_ID, "1614265330",
                            "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=", VEC_BODY, VEC_TS),
                     WHK_BAD_SIGNATURE);
}

static void timestamps_outside_the_tolerance_are_refused(void **state)
{
    whk_key_t k = vec_key();

    (void)state;
    assert_int_equal(verify(&k, VEC_ID, "1614265330", VEC_SIG, VEC_BODY, VEC_TS + 300), WHK_VALID);
    assert_int_equal(verify(&k, VEC_ID, "1614265330", VEC_SIG, VEC_BODY, VEC_TS + 301),
                     WHK_STALE_TIMESTAMP);
    assert_int_equal(verify(&k, VEC_ID, "1614265330", VEC_SIG, VEC_BODY, VEC_TS - 301),
                     WHK_STALE_TIMESTAMP);
    assert_int_equal(verify(&k, VEC_ID, "16142a5330", VEC_SIG, VEC_BODY, VEC_TS),
                     WHK_BAD_TIMESTAMP);
    assert_int_equal(verify(&k, VEC_ID, "-1", VEC_SIG, VEC_BODY, VEC_TS), WHK_BAD_TIMESTAMP);
    assert_int_equal(verify(&k, VEC_ID, "", VEC_SIG, VEC_BODY, VEC_TS), WHK_BAD_TIMESTAMP);
}

static void missing_headers(void **state)
{
    whk_key_t k = vec_key();

    (void)state;
    assert_int_equal(whk_verify(&k, NULL, "1614265330", VEC_SIG, "", 0, VEC_TS, 300),
                     WHK_MISSING_HEADER);
    assert_int_equal(whk_verify(&k, VEC_ID, NULL, VEC_SIG, "", 0, VEC_TS, 300), WHK_MISSING_HEADER);
    assert_int_equal(whk_verify(&k, VEC_ID, "1614265330", NULL, "", 0, VEC_TS, 300),
                     WHK_MISSING_HEADER);
    assert_string_equal(whk_verdict_name(WHK_MISSING_HEADER), "missing-header");
    assert_string_equal(whk_verdict_name(WHK_BAD_SIGNATURE), "bad-signature");
}

static void bad_secrets_and_ids_are_refused(void **state)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    char sig[WHK_SIGNATURE_LEN];
    whk_key_t k;

    (void)state;
    assert_int_equal(whk_key_parse("whsec_", &k, errbuf), SVC_EINVAL);
    assert_int_equal(whk_key_parse("whsec_abc", &k, errbuf), SVC_EINVAL);  /* not 4n */
    assert_int_equal(whk_key_parse("whsec_ab$d", &k, errbuf), SVC_EINVAL); /* not base64 */
    assert_int_equal(whk_key_parse(NULL, &k, errbuf), SVC_EINVAL);
    assert_non_null(strstr(errbuf, "webhook secret"));
    k = vec_key();
    assert_int_equal(whk_sign(&k, "has space", 1, "", 0, sig), SVC_EINVAL);
    assert_int_equal(whk_sign(&k, "", 1, "", 0, sig), SVC_EINVAL);
}

/* The spec: no '.' in a webhook-id, the separator of "<id>.<timestamp>.<body>". */
static void ids_with_a_dot_are_refused(void **state)
{
    char sig[WHK_SIGNATURE_LEN];
    whk_key_t k = vec_key();

    (void)state;
    assert_int_equal(whk_sign(&k, "msg.1", 1, "", 0, sig), SVC_EINVAL);
    assert_int_equal(verify(&k, "msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330", "1614265330", VEC_SIG,
                            VEC_BODY, VEC_TS),
                     WHK_BAD_ID);
    assert_string_equal(whk_verdict_name(WHK_BAD_ID), "bad-id");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_spec_vector),
        cmocka_unit_test(headers_are_ready_lines),
        cmocka_unit_test(tampering_is_caught),
        cmocka_unit_test(one_matching_entry_of_several_is_enough),
        cmocka_unit_test(timestamps_outside_the_tolerance_are_refused),
        cmocka_unit_test(missing_headers),
        cmocka_unit_test(bad_secrets_and_ids_are_refused),
        cmocka_unit_test(ids_with_a_dot_are_refused),
    };

    return cmocka_run_group_tests_name("whk", tests, NULL, NULL);
}
