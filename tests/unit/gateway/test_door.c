/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_door.c - the front door made from the settings (gateway/door.h): the
 * route table's rules reach guard.h, a setting that would leave a route
 * unlimited or a key set unusable is a start-up error, and the refusals are
 * counted in the metrics.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <cmocka.h>

#include "door.h"
#include "jwt_keys.h"
#include "routes.h"

static const char *env_jwks, *env_issuer, *env_limits;

static const char *fake_getenv(const char *name)
{
    if (strcmp(name, "GATEWAY_JWKS_FILE") == 0)
        return env_jwks;
    if (strcmp(name, "GATEWAY_JWT_ISSUER") == 0)
        return env_issuer;
    if (strcmp(name, "GATEWAY_RATE_LIMITS") == 0)
        return env_limits;
    return NULL;
}

/* The door of these settings (NULL: the default); *err its result. */
static gw_door_t *door_of(const char *jwks, const char *issuer, const char *limits, svc_err_t *err,
                          char errbuf[static SVC_ERRBUF_LEN])
{
    gw_config_t cfg;
    gw_door_t *d = NULL;

    env_jwks = jwks;
    env_issuer = issuer;
    env_limits = limits;
    if (gw_config_load(&cfg, fake_getenv, errbuf) != SVC_OK)
        fail_msg("gw_config_load: %s", errbuf);
    *err = gw_door_new(&cfg, gw_routes, gw_n_routes, &d, errbuf);
    return d;
}

static size_t route_index(const char *method, const char *path)
{
    gw_match_t m;

    assert_int_equal(
        gw_route_match(gw_routes, gw_n_routes, method, strlen(method), path, strlen(path), &m),
        GW_MATCH_OK);
    return (size_t)(m.route - gw_routes);
}

static void check(gw_door_t *d, const char *method, const char *path, gw_guard_verdict_t *v)
{
    static struct sockaddr_in peer;
    gw_guard_request_t rq = {NULL, 0, (const struct sockaddr *)&peer, 1000000000};

    peer.sin_family = AF_INET;
    peer.sin_addr.s_addr = htonl(0x7f000001);
    gw_door_check(d, NULL, route_index(method, path), &rq, v);
}

static char *render(const gw_door_t *d)
{
    size_t len = 0;
    char *buf;

    assert_int_equal(gw_door_render(d, NULL, 0, &len), SVC_ERANGE);
    buf = malloc(len + 1);
    assert_non_null(buf);
    assert_int_equal(gw_door_render(d, buf, len + 1, &len), SVC_OK);
    return buf;
}

/* No key set: the public reads pass, every scoped route is 401, and the
 * refusals are counted. */
static void without_keys_only_public_routes_pass(void **state)
{
    char errbuf[SVC_ERRBUF_LEN] = "", *text;
    gw_guard_verdict_t v;
    gw_auth_loop_t *l = (gw_auth_loop_t *)&v; /* must be replaced by NULL */
    svc_err_t err;
    gw_door_t *d = door_of(NULL, NULL, "off", &err, errbuf);

    (void)state;
    assert_int_equal(err, SVC_OK);
    assert_int_equal(gw_door_loop_new(d, &l), SVC_OK);
    assert_null(l);
    assert_null(gw_door_ratelimit(d));
    check(d, "GET", "/v1/products/x", &v);
    assert_int_equal(v.status, 0);
    check(d, "GET", "/v1/products", &v);
    assert_int_equal(v.status, 0);
    check(d, "POST", "/v1/products", &v);
    assert_int_equal(v.status, 401);
    check(d, "POST", "/v1/orders", &v);
    assert_int_equal(v.status, 401);
    check(d, "GET", "/v1/orders/x", &v);
    assert_int_equal(v.status, 401);
    assert_string_equal(v.challenge, "Bearer realm=\"shopmicro\"");
    text = render(d);
    assert_non_null(strstr(text, "gateway_auth_refused_total{status=\"401\"} 3\n"));
    assert_non_null(strstr(text, "gateway_auth_keyset_generation 0\n"));
    assert_non_null(strstr(text, "gateway_auth_tokens_total{result=\"valid\"} 0\n"));
    assert_non_null(strstr(text, "gateway_auth_tokens_total{result=\"bad_signature\"} 0\n"));
    free(text);
    gw_door_free(d);
}

/* The GETs are "read", the POSTs "write"; the health routes are never limited. */
static void routes_get_their_rate_class(void **state)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    gw_guard_verdict_t v;
    svc_err_t err;
    gw_door_t *d = door_of(NULL, NULL, "read=1/m,burst=1;write=off", &err, errbuf);

    (void)state;
    assert_int_equal(err, SVC_OK);
    assert_non_null(gw_door_ratelimit(d));
    check(d, "GET", "/v1/products", &v);
    assert_int_equal(v.status, 0);
    assert_true(v.has_rl);
    assert_string_equal(v.rl.policy, "\"read\";q=1;w=60");
    check(d, "GET", "/v1/products/x", &v); /* the same client, the same class */
    assert_int_equal(v.status, 429);
    assert_int_equal(v.retry_after_s, 60);
    for (int i = 0; i < 5; i++) {
        check(d, "GET", "/healthz", &v);
        assert_int_equal(v.status, 0);
        assert_false(v.has_rl);
    }
    check(d, "POST", "/v1/products", &v); /* write=off: only the missing token stops it */
    assert_int_equal(v.status, 401);
    assert_false(v.has_rl);
    gw_door_free(d);
}

static void expect_refused(const char *jwks, const char *issuer, const char *limits,
                           const char *part)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    svc_err_t err;
    gw_door_t *d = door_of(jwks, issuer, limits, &err, errbuf);

    if (err != SVC_EINVAL || d != NULL)
        fail_msg("accepted (%s): jwks=%s issuer=%s limits=%s", svc_err_name(err),
                 jwks != NULL ? jwks : "-", issuer != NULL ? issuer : "-",
                 limits != NULL ? limits : "-");
    if (strstr(errbuf, part) == NULL)
        fail_msg("\"%s\" does not mention \"%s\"", errbuf, part);
}

/* What would leave a route unlimited or the key set unusable stops the start. */
static void settings_that_cannot_work_are_errors(void **state)
{
    char dir[64], path[128];
    EVP_PKEY *key = tk_ec("P-256");
    char *json = tk_jwks(tk_jwk(key, "k1", GW_JWS_ES256), NULL);
    char errbuf[SVC_ERRBUF_LEN] = "";
    svc_err_t err;
    gw_door_t *d;

    (void)state;
    snprintf(dir, sizeof dir, "/tmp/test_door.XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/jwks.json", dir);
    tk_write_file(path, json);
    free(json);
    EVP_PKEY_free(key);

    expect_refused(NULL, NULL, "read=10/s", "no class \"write\", which POST /v1/products");
    expect_refused(NULL, NULL, "write=10/s", "no class \"read\"");
    expect_refused(NULL, NULL, "read=10/x;write=off", "unknown unit");
    expect_refused(path, NULL, "off", "GATEWAY_JWT_ISSUER is empty");
    expect_refused("/nonexistent/jwks.json", TK_ISS, "off", "/nonexistent/jwks.json");

    d = door_of(path, TK_ISS, NULL, &err, errbuf); /* and the default limits */
    assert_int_equal(err, SVC_OK);
    {
        gw_auth_loop_t *l = NULL;
        char *text = render(d);
        assert_int_equal(gw_door_loop_new(d, &l), SVC_OK);
        assert_non_null(l);
        assert_non_null(strstr(text, "gateway_auth_keyset_generation 1\n"));
        gw_auth_loop_free(l);
        free(text);
    }
    gw_door_free(d);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(without_keys_only_public_routes_pass),
        cmocka_unit_test(routes_get_their_rate_class),
        cmocka_unit_test(settings_that_cannot_work_are_errors),
    };
    return cmocka_run_group_tests_name("door", tests, NULL, NULL);
}
