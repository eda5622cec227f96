/* SPDX-License-Identifier: Apache-2.0 */
/* test_webhook.c - pkg/webhook: the Standard Webhooks test vector, and every
 * way a delivery may be tampered with. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
        whk_key_parse("whsec_d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldA==", &other, SVC_ERRBUF_SCRATCH),
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

/* The spec's minimum is 24 bytes: 23 is refused, 24 taken; so is 64, not 65. */
static void keys_of_24_to_64_bytes(void **state)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    whk_key_t k;

    (void)state;
    /* base64 of 23, 24, 65 and 64 bytes of 'A' */
    assert_int_equal(whk_key_parse("whsec_QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE=", &k, errbuf),
                     SVC_EINVAL);
    assert_non_null(strstr(errbuf, "23 bytes, at least 24"));
    assert_int_equal(whk_key_parse("whsec_QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB", &k, errbuf), SVC_OK);
    assert_int_equal(k.len, 24);
    assert_int_equal(whk_key_parse("QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB"
                                   "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE=",
                                   &k, errbuf),
                     SVC_EINVAL);
    assert_int_equal(whk_key_parse("QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB"
                                   "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQQ==",
                                   &k, errbuf),
                     SVC_OK);
    assert_int_equal(k.len, 64);
}

/* The development secret the services defaulted to and the k8s placeholder
 * that decoded to a key: public, so refused, with or without the prefix. */
static void public_keys_are_refused(void **state)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    whk_key_t k;

    (void)state;
    assert_int_equal(whk_key_parse("whsec_c2hvcG1pY3JvLWxvY2FsLWRldi1zZWNyZXQh", &k, errbuf),
                     SVC_EINVAL);
    assert_non_null(strstr(errbuf, "public"));
    assert_int_equal(whk_key_parse("c2hvcG1pY3JvLWxvY2FsLWRldi1zZWNyZXQh", &k, errbuf), SVC_EINVAL);
    assert_int_equal(
        whk_key_parse("whsec_Q0hBTkdFLU1FLW5vdC1hLXJlYWwtc2lnbmluZy1rZXk=", &k, errbuf),
        SVC_EINVAL);
    /* today's k8s placeholder is not base64 at all */
    assert_int_equal(whk_key_parse("whsec_CHANGE-ME-make-a-random-one", &k, errbuf), SVC_EINVAL);
}

#define OLD_SECRET VEC_SECRET
#define NEW_SECRET "whsec_cm90YXRpb24tbmV3LWtleS1mb3ItdGhlLXNpbmstaXQ="

static void key_sets_parse_and_refuse(void **state)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    whk_keyset_t ks;

    (void)state;
    assert_int_equal(whk_keyset_parse(NEW_SECRET " " OLD_SECRET, &ks, errbuf), SVC_OK);
    assert_int_equal(ks.n, 2);
    assert_int_equal(whk_keyset_parse(" " NEW_SECRET ",\n" OLD_SECRET "\n", &ks, errbuf), SVC_OK);
    assert_int_equal(ks.n, 2);
    assert_int_equal(whk_keyset_parse(OLD_SECRET, &ks, errbuf), SVC_OK);
    assert_int_equal(ks.n, 1);
    assert_int_equal(whk_keyset_parse(" , ", &ks, errbuf), SVC_EINVAL);
    assert_non_null(strstr(errbuf, "not set"));
    assert_int_equal(whk_keyset_parse(NEW_SECRET " whsec_QUFBQQ==", &ks, errbuf), SVC_EINVAL);
    assert_non_null(strstr(errbuf, "webhook secret 2: 4 bytes"));
    assert_null(strstr(errbuf, "QUFBQQ")); /* the value is never in the message */
    assert_int_equal(whk_keyset_parse(OLD_SECRET " " OLD_SECRET, &ks, errbuf), SVC_EINVAL);
    assert_non_null(strstr(errbuf, "the same as secret 1"));
    assert_int_equal(whk_keyset_parse(NEW_SECRET " " OLD_SECRET " " NEW_SECRET "x", &ks, errbuf),
                     SVC_EINVAL);
}

static void key_sets_load_from_a_value_or_a_file(void **state)
{
    char errbuf[SVC_ERRBUF_LEN] = "", path[] = "/tmp/test_webhook_XXXXXX";
    whk_keyset_t ks;
    int fd;

    (void)state;
    assert_int_equal(whk_keyset_load("X_SECRET", "", "", &ks, errbuf), SVC_EINVAL);
    assert_non_null(strstr(errbuf, "X_SECRET (or X_SECRET_FILE, a file holding it) is required"));
    assert_int_equal(whk_keyset_load("X_SECRET", OLD_SECRET, "/x", &ks, errbuf), SVC_EINVAL);
    assert_non_null(strstr(errbuf, "both set"));
    assert_int_equal(whk_keyset_load("X_SECRET", NULL, "/nonexistent/x", &ks, errbuf),
                     SVC_EUNAVAIL);
    assert_non_null(strstr(errbuf, "X_SECRET_FILE=/nonexistent/x: cannot read it"));
    assert_int_equal(whk_keyset_load("X_SECRET", "whsec_QUFBQQ==", NULL, &ks, errbuf), SVC_EINVAL);
    assert_non_null(strstr(errbuf, "X_SECRET: webhook secret 1: 4 bytes"));
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_true(write(fd, NEW_SECRET "\n" OLD_SECRET "\n", strlen(NEW_SECRET OLD_SECRET) + 2) > 0);
    close(fd);
    assert_int_equal(whk_keyset_load("X_SECRET", "", path, &ks, errbuf), SVC_OK);
    assert_int_equal(ks.n, 2);
    unlink(path);
}

/* The sender signs with every key; the receiver accepts any match. */
static void rotation_signs_with_all_and_verifies_with_any(void **state)
{
    whk_keyset_t both, old_only, new_only;
    whk_headers_t h;
    const char *sig;

    (void)state;
    assert_int_equal(whk_keyset_parse(NEW_SECRET " " OLD_SECRET, &both, SVC_ERRBUF_SCRATCH),
                     SVC_OK);
    assert_int_equal(whk_keyset_parse(OLD_SECRET, &old_only, SVC_ERRBUF_SCRATCH), SVC_OK);
    assert_int_equal(whk_keyset_parse(NEW_SECRET, &new_only, SVC_ERRBUF_SCRATCH), SVC_OK);
    assert_int_equal(whk_headers_make_all(&both, VEC_ID, VEC_TS, VEC_BODY, strlen(VEC_BODY), &h),
                     SVC_OK);
    sig = h.signature + strlen("webhook-signature: ");
    /* two v1 entries, the old key's the spec vector's */
    assert_non_null(strstr(sig, " " VEC_SIG));
    assert_int_equal(strncmp(sig, "v1,", 3), 0);
    assert_int_equal(strlen(sig), 2 * (WHK_SIGNATURE_LEN - 1) + 1);
    assert_int_equal(whk_verify_any(&old_only, VEC_ID, "1614265330", sig, VEC_BODY,
                                    strlen(VEC_BODY), VEC_TS, 300),
                     WHK_VALID);
    assert_int_equal(whk_verify_any(&new_only, VEC_ID, "1614265330", sig, VEC_BODY,
                                    strlen(VEC_BODY), VEC_TS, 300),
                     WHK_VALID);
    /* a receiver with both keys takes a delivery signed with the old one only */
    assert_int_equal(whk_verify_any(&both, VEC_ID, "1614265330", VEC_SIG, VEC_BODY,
                                    strlen(VEC_BODY), VEC_TS, 300),
                     WHK_VALID);
    assert_int_equal(
        whk_headers_make_all(&new_only, VEC_ID, VEC_TS, VEC_BODY, strlen(VEC_BODY), &h), SVC_OK);
    assert_int_equal(whk_verify_any(&old_only, VEC_ID, "1614265330",
                                    h.signature + strlen("webhook-signature: "), VEC_BODY,
                                    strlen(VEC_BODY), VEC_TS, 300),
                     WHK_BAD_SIGNATURE);
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
        cmocka_unit_test(keys_of_24_to_64_bytes),
        cmocka_unit_test(public_keys_are_refused),
        cmocka_unit_test(key_sets_parse_and_refuse),
        cmocka_unit_test(key_sets_load_from_a_value_or_a_file),
        cmocka_unit_test(rotation_signs_with_all_and_verifies_with_any),
    };

    return cmocka_run_group_tests_name("whk", tests, NULL, NULL);
}
