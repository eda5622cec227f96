/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_gateway_resilience_page.c - the live resilience page over plain HTTP
 * (the browser test, tests/browser, drives it in Chromium): the page itself
 * (self-contained: no URL it would load), the gateway's feed with the peers
 * of GATEWAY_RESILIENCE_PEERS, order's feed on its admin port (pkg/ops) with
 * Access-Control-Allow-Origin: * and read-only, and what the feed says
 * when the catalog is killed: the breaker open, its transition and the
 * decisions that led there, then the rejections. The feed's polls stay out
 * of the info-level access log.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_it.h"

/* The catalog, order, and a gateway that knows order's admin port. */
static int setup(void **state)
{
    static char peers[96];
    static const char *env[] = {"GATEWAY_BACKOFF_BASE_MS=10", "GATEWAY_BACKOFF_CAP_MS=20",
                                "GATEWAY_STALE_READS=off", peers, NULL};
    char errbuf[SVC_ERRBUF_LEN] = "", *log, *at;
    gw_it_t *t;
    int port = 0;

    if (gw_it_setup_env(state, true, NULL) != 0)
        return -1;
    t = *state;
    log = spawn_log_read(t->ord);
    at = log != NULL ? strstr(log, "admin port bound to ") : NULL;
    if (at == NULL || (at = strstr(at, "(port ")) == NULL || sscanf(at, "(port %d)", &port) != 1) {
        fprintf(stderr, "order's log names no admin port\n");
        free(log);
        return -1;
    }
    free(log);
    snprintf(peers, sizeof peers, "GATEWAY_RESILIENCE_PEERS=order=http://127.0.0.1:%d/", port);
    if (gw_it_gateway_stop(t) != 0 || gw_it_gateway_start(t, env, errbuf) != SVC_OK) {
        fprintf(stderr, "gateway restart: %s\n", errbuf);
        return -1;
    }
    return 0;
}

/* The URL of order's feed, from the gateway's feed. */
static void order_feed_url(CURL *h, const gw_it_t *t, char *url, size_t len)
{
    gw_res_t r;
    const char *peers;

    gw_admin_get(h, t, "/debug/resilience.json", &r);
    gw_assert_status(&r, 200);
    peers = strstr(r.body, "\"peers\":[{\"service\":\"order\",");
    assert_non_null(peers);
    assert_true(gw_json_str(peers, "url", url, len));
    gw_res_free(&r);
}

static void the_page_is_self_contained(void **state)
{
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();
    char v[128];
    gw_res_t r;

    gw_admin_get(h, t, "/debug/resilience", &r);
    gw_assert_status(&r, 200);
    assert_true(gw_res_header(&r, "Content-Type", v, sizeof v));
    assert_string_equal(v, "text/html; charset=utf-8");
    assert_non_null(strstr(r.body, "data-upstream"));
    assert_non_null(strstr(r.body, "fetchFeed(\"resilience.json\")")); /* next to the page */
    /* The one "://" is SVG's namespace name, which nothing loads. */
    for (const char *p = strstr(r.body, "://"); p != NULL; p = strstr(p + 3, "://"))
        assert_memory_equal(p - 4, "http://www.w3.org/2000/svg", 26);
    gw_res_free(&r);
    curl_easy_cleanup(h);
}

static void order_serves_its_feed_cross_origin(void **state)
{
    gw_it_t *t = *state, admin = *t;
    CURL *h = curl_easy_init();
    char url[128], v[64];
    gw_res_t r;

    order_feed_url(h, t, url, sizeof url);
    /* The trailing '/' of the setting is dropped before the path. */
    assert_non_null(strstr(url, "/debug/resilience.json"));
    assert_null(strstr(url, "//debug"));
    *strstr(url, "/debug/resilience.json") = '\0';
    snprintf(admin.base, sizeof admin.base, "%.63s", url);
    gw_call(h, &admin, "GET", "/debug/resilience.json", NULL, NULL, &r);
    gw_assert_status(&r, 200);
    assert_true(gw_res_header(&r, "Access-Control-Allow-Origin", v, sizeof v));
    assert_string_equal(v, "*");
    assert_memory_equal(r.body, "{\"service\":\"order\",\"resilience\":{\"now_ms\":", 42);
    assert_non_null(strstr(r.body, "\"upstreams\":[{\"name\":\"catalog\",\"breaker\":{"
                                   "\"state\":\"closed\","));
    gw_res_free(&r);
    gw_call(h, &admin, "POST", "/debug/resilience.json", "{}", NULL, &r);
    gw_assert_status(&r, 405);
    gw_res_free(&r);
    gw_call(h, &admin, "GET", "/debug/nothing", NULL, NULL, &r);
    gw_assert_status(&r, 404);
    assert_false(gw_res_header(&r, "Access-Control-Allow-Origin", v, sizeof v));
    gw_res_free(&r);
    curl_easy_cleanup(h);
}

/* The gateway's catalog upstream, the first in its feed. */
static char *catalog_feed(CURL *h, const gw_it_t *t)
{
    gw_res_t r;
    char *body;

    gw_admin_get(h, t, "/debug/resilience.json", &r);
    gw_assert_status(&r, 200);
    assert_non_null(strstr(r.body, "\"resilience\":{\"now_ms\":"));
    assert_non_null(strstr(r.body, "{\"name\":\"order\",\"breaker\":"));
    body = r.body;
    r.body = NULL;
    gw_res_free(&r);
    return body;
}

static void the_feed_follows_an_outage(void **state)
{
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();
    char id[37], *feed;
    gw_res_t r;

    gw_it_product(h, t, "page mug", 900, 3, id);
    feed = catalog_feed(h, t);
    assert_non_null(strstr(feed, "{\"name\":\"catalog\",\"breaker\":{\"state\":\"closed\","));
    free(feed);
    gw_it_catalog_kill(t);
    for (int i = 0; i < 7; i++) { /* 5 to trip, 2 rejected */
        char path[64];
        snprintf(path, sizeof path, "/v1/products/%s", id);
        gw_call(h, t, "GET", path, NULL, NULL, &r);
        gw_assert_status(&r, 503);
        gw_res_free(&r);
    }
    feed = catalog_feed(h, t);
    assert_non_null(strstr(feed, "{\"name\":\"catalog\",\"breaker\":{\"state\":\"open\","));
    assert_non_null(strstr(feed, "\"from\":\"closed\",\"to\":\"open\","
                                 "\"why\":\"after 5 consecutive failures\"}]"));
    assert_non_null(strstr(feed, "\"calls\":{\"total\":8,\"originals\":6,"));
    assert_non_null(strstr(feed, "\"method\":\"GetProduct\",\"decision\":\"retry\","
                                 "\"reason\":\"unavailable\",\"attempt\":1,"));
    assert_non_null(strstr(feed, "\"decision\":\"fail\",\"reason\":\"attempts-exhausted\","
                                 "\"attempt\":3,"));
    assert_non_null(strstr(feed, "\"decision\":\"reject\",\"reason\":\"breaker-open\","
                                 "\"attempt\":0,\"max_attempts\":3,\"delay_ms\":0,"
                                 "\"err\":\"UNAVAILABLE\",\"repeat\":2,"));
    free(feed);
    /* Polled twice a second, on the admin port: no access line for it. */
    assert_false(spawn_log_contains(t->gw, "path=\"/debug/resilience.json\""));
    assert_true(spawn_log_contains(t->gw, "path=\"/v1/products/"));
    curl_easy_cleanup(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(the_page_is_self_contained, setup, gw_it_teardown),
        cmocka_unit_test_setup_teardown(order_serves_its_feed_cross_origin, setup, gw_it_teardown),
        cmocka_unit_test_setup_teardown(the_feed_follows_an_outage, setup, gw_it_teardown),
    };

    int rc;

    cat_it_global_init();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = cmocka_run_group_tests_name("gateway_resilience_page", tests, NULL, NULL);
    curl_global_cleanup();
    cat_it_global_fini();
    return rc;
}
