/* SPDX-License-Identifier: Apache-2.0 */
/* test_ratelimit.c - gateway/ratelimit.c on a time the test passes in: a
 * burst then refusal, refill after exactly the right time, fractional
 * rates, Retry-After and reset rounding, keys and classes apart, eviction
 * at capacity (full buckets first) and the table's bound, folded long
 * keys, the setting's parser on good and bad input, the header values and
 * the metrics text, byte for byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <cmocka.h>

#include "ratelimit.h"
#include "support/group.h"

#define T0  (UINT64_C(1) << 40)
#define MS  UINT64_C(1000000)
#define SEC UINT64_C(1000000000)

static gw_rl_t *rl;

static gw_rl_t *make(const char *spec_text, size_t capacity, size_t shards)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    gw_rl_spec_t spec;
    gw_rl_opts_t o;

    if (gw_rl_spec_parse(spec_text, &spec, errbuf) != SVC_OK)
        fail_msg("%s: %s", spec_text, errbuf);
    gw_rl_opts_init(&o);
    o.spec = &spec;
    o.capacity = capacity;
    o.shards = shards;
    assert_int_equal(gw_rl_new(&o, &rl), SVC_OK);
    return rl;
}

static int teardown(void **state)
{
    (void)state;
    gw_rl_free(rl);
    rl = NULL;
    return 0;
}

static gw_rl_decision_t check(const char *cls, const char *key, uint64_t now)
{
    gw_rl_decision_t d;
    int c = gw_rl_class_index(rl, cls, strlen(cls));

    assert_true(c >= 0);
    assert_int_equal(gw_rl_check(rl, (size_t)c, key, strlen(key), now, &d), SVC_OK);
    return d;
}

static bool allowed(const char *cls, const char *key, uint64_t now)
{
    return check(cls, key, now).allowed;
}

static void burst_then_refusal(void **state)
{
    gw_rl_decision_t d;

    (void)state;
    make("read=10/s,burst=5", 1024, 4);
    for (uint64_t i = 0; i < 5; i++) {
        d = check("read", "sub:c1", T0);
        assert_true(d.allowed);
        assert_int_equal(d.remaining, 4 - i);
        assert_int_equal(d.retry_after_s, 0);
    }
    d = check("read", "sub:c1", T0);
    assert_false(d.allowed);
    assert_int_equal(d.remaining, 0);
    assert_int_equal(d.retry_after_s, 1);
    assert_int_equal(d.quota, 5);
    assert_int_equal(d.window_s, 1); /* 5 tokens at 10/s: 0.5 s, rounded up */
}

static void refill_after_exactly_the_right_time(void **state)
{
    (void)state;
    make("read=10/s,burst=2", 1024, 4);
    assert_true(allowed("read", "k", T0));
    assert_true(allowed("read", "k", T0));
    assert_false(allowed("read", "k", T0));
    /* one token every 100 ms: not a nanosecond earlier */
    assert_false(allowed("read", "k", T0 + 100 * MS - 1));
    assert_true(allowed("read", "k", T0 + 100 * MS));
    assert_false(allowed("read", "k", T0 + 100 * MS));
    /* the part of a token earned before a check is kept, not dropped */
    assert_false(allowed("read", "k", T0 + 150 * MS));
    assert_true(allowed("read", "k", T0 + 200 * MS));
    /* a long pause fills the bucket to its burst, no more */
    assert_true(allowed("read", "k", T0 + 3600 * SEC));
    assert_true(allowed("read", "k", T0 + 3600 * SEC));
    assert_false(allowed("read", "k", T0 + 3600 * SEC));
}

static void fractional_rates(void **state)
{
    (void)state;
    make("half=0.5/s;odd=2.5/s,burst=1;slow=30/m,burst=1", 1024, 4);
    /* 0.5/s: the default burst is 1, then one token every 2 s */
    assert_true(allowed("half", "k", T0));
    assert_false(allowed("half", "k", T0));
    assert_false(allowed("half", "k", T0 + 2 * SEC - 1));
    assert_true(allowed("half", "k", T0 + 2 * SEC));
    /* 2.5/s: one every 400 ms, exact over many periods */
    assert_true(allowed("odd", "k", T0));
    for (uint64_t i = 1; i <= 10; i++) {
        assert_false(allowed("odd", "k", T0 + i * 400 * MS - 1));
        assert_true(allowed("odd", "k", T0 + i * 400 * MS));
    }
    /* 30/m is 0.5/s */
    assert_true(allowed("slow", "k", T0));
    assert_false(allowed("slow", "k", T0 + 2 * SEC - 1));
    assert_true(allowed("slow", "k", T0 + 2 * SEC));
}

static void retry_after_and_reset_rounding(void **state)
{
    gw_rl_decision_t d;

    (void)state;
    make("m=1/m;h=10/h,burst=1;fast=1000/s,burst=3;s=1/s,burst=5", 1024, 4);
    assert_true(allowed("m", "k", T0));
    d = check("m", "k", T0);
    assert_false(d.allowed);
    assert_int_equal(d.retry_after_s, 60);
    assert_int_equal(d.reset_s, 60);
    d = check("m", "k", T0 + 1 * SEC); /* 59 s to go: 59 */
    assert_int_equal(d.retry_after_s, 59);
    d = check("m", "k", T0 + 59 * SEC + 500 * MS); /* 0.5 s to go: 1 */
    assert_int_equal(d.retry_after_s, 1);

    assert_true(allowed("h", "k", T0));
    assert_int_equal(check("h", "k", T0).retry_after_s, 360);

    /* a token in 1 ms is still "Retry-After: 1", never 0 */
    for (int i = 0; i < 3; i++)
        assert_true(allowed("fast", "k", T0));
    d = check("fast", "k", T0);
    assert_false(d.allowed);
    assert_int_equal(d.retry_after_s, 1);
    assert_int_equal(d.reset_s, 1);

    /* reset: until the bucket is full again */
    for (int i = 0; i < 3; i++)
        d = check("s", "k", T0);
    assert_int_equal(d.remaining, 2);
    assert_int_equal(d.reset_s, 3);
    d = check("s", "k", T0 + 1500 * MS); /* 3.5 tokens, one taken: 2.5 short */
    assert_int_equal(d.remaining, 2);
    assert_int_equal(d.reset_s, 3);
    assert_int_equal(d.window_s, 5);
}

static void keys_and_classes_are_independent(void **state)
{
    (void)state;
    make("read=1/s,burst=2;write=1/s,burst=1", 1024, 4);
    assert_true(allowed("read", "sub:a", T0));
    assert_true(allowed("read", "sub:a", T0));
    assert_false(allowed("read", "sub:a", T0));
    /* another key, the same key in another class, a key that is a prefix */
    assert_true(allowed("read", "sub:b", T0));
    assert_true(allowed("write", "sub:a", T0));
    assert_false(allowed("write", "sub:a", T0));
    assert_true(allowed("read", "sub:", T0));
    assert_true(allowed("read", "sub:aa", T0));
    assert_false(allowed("read", "sub:a", T0));
}

static gw_rl_stats_t stats(void)
{
    gw_rl_stats_t s;

    gw_rl_stats(rl, &s);
    return s;
}

static void eviction_at_capacity_prefers_full_buckets(void **state)
{
    char key[32];

    (void)state;
    make("read=1/s,burst=4", 16, 1);
    /* A emptied, B one token short, then 14 others one short: all at T0 */
    for (int i = 0; i < 4; i++)
        assert_true(allowed("read", "A", T0));
    assert_true(allowed("read", "B", T0));
    for (int i = 0; i < 14; i++) {
        snprintf(key, sizeof key, "k%d", i);
        assert_true(allowed("read", key, T0));
    }
    assert_int_equal(stats().buckets, 16);
    /* at T0 + 1.5 s A (least recently used) holds 1.5, B is full again:
     * a new key takes B's slot, not A's */
    assert_true(allowed("read", "new", T0 + 1500 * MS));
    assert_int_equal(stats().evictions_full, 1);
    assert_int_equal(stats().evictions_partial, 0);
    assert_int_equal(stats().buckets, 16);
    /* A kept its state: one token, then refused */
    assert_true(allowed("read", "A", T0 + 1500 * MS));
    assert_false(allowed("read", "A", T0 + 1500 * MS));
}

static void eviction_without_full_buckets_takes_the_least_recent(void **state)
{
    char key[32];

    (void)state;
    make("read=1/h,burst=2", 16, 1);
    for (int i = 0; i < 16; i++) {
        snprintf(key, sizeof key, "k%d", i);
        assert_true(allowed("read", key, T0)); /* each one token short */
    }
    assert_true(allowed("read", "k0", T0));  /* k0 emptied and most recent */
    assert_true(allowed("read", "new", T0)); /* evicts k1, partial */
    assert_int_equal(stats().evictions_partial, 1);
    assert_false(allowed("read", "k0", T0)); /* kept: still empty */
    /* k1 comes back full (a fresh burst: what "partial" counts) */
    assert_true(allowed("read", "k1", T0));
    assert_true(allowed("read", "k1", T0));
    assert_int_equal(stats().evictions_partial, 2);
}

static void table_never_grows(void **state)
{
    char key[32];
    gw_rl_stats_t s;

    (void)state;
    make("read=10/s", 64, 4);
    for (int i = 0; i < 10000; i++) {
        snprintf(key, sizeof key, "ip:10.0.%d.%d", i / 256, i % 256);
        assert_true(allowed("read", key, T0 + (uint64_t)i * MS));
        assert_true(stats().buckets <= 64);
    }
    s = stats();
    assert_int_equal(s.buckets, 64);
    assert_int_equal(s.capacity, 64);
    assert_int_equal(s.evictions_full + s.evictions_partial, 10000 - 64);
    assert_int_equal(s.allowed[0], 10000);
}

static void long_keys_are_folded_not_merged(void **state)
{
    char a[200], b[200];

    (void)state;
    make("read=1/h,burst=1", 1024, 4);
    memset(a, 'x', sizeof a - 1);
    a[sizeof a - 1] = '\0';
    memcpy(b, a, sizeof a);
    b[sizeof b - 2] = 'y'; /* the same first 198 bytes */
    assert_true(allowed("read", a, T0));
    assert_false(allowed("read", a, T0));
    assert_true(allowed("read", b, T0));
    assert_false(allowed("read", b, T0));
    /* exactly GW_RL_KEY_MAX bytes is stored as it is; one more is folded */
    a[GW_RL_KEY_MAX] = '\0';
    b[GW_RL_KEY_MAX + 1] = '\0';
    memset(b, 'x', GW_RL_KEY_MAX + 1);
    assert_true(allowed("read", a, T0));
    assert_true(allowed("read", b, T0));
}

static void time_behind_the_bucket_adds_nothing(void **state)
{
    (void)state;
    make("read=1/s,burst=1", 1024, 4);
    assert_true(allowed("read", "k", T0 + SEC));
    assert_false(allowed("read", "k", T0)); /* a clock read before the last check */
    assert_false(allowed("read", "k", T0 + 2 * SEC - 1));
    assert_true(allowed("read", "k", T0 + 2 * SEC));
}

static void off_class_and_bad_calls(void **state)
{
    gw_rl_decision_t d;
    gw_rl_headers_t h;

    (void)state;
    make("read=off;write=1/h,burst=1", 1024, 4);
    for (int i = 0; i < 100; i++)
        assert_true(allowed("read", "k", T0));
    d = check("read", "k", T0);
    assert_false(d.limited_class);
    gw_rl_headers_format(&d, &h);
    assert_string_equal(h.policy, "");
    assert_string_equal(h.ratelimit, "");
    assert_string_equal(h.retry_after, "");
    assert_int_equal(gw_rl_check(rl, 2, "k", 1, T0, &d), SVC_EINVAL);
    assert_true(d.allowed);
    assert_int_equal(gw_rl_check(rl, 1, "", 0, T0, &d), SVC_EINVAL);
    assert_true(d.allowed);
    assert_int_equal(gw_rl_class_index(rl, "nope", 4), -1);
    assert_int_equal(gw_rl_class_index(rl, "write", 5), 1);
    assert_int_equal(gw_rl_class_index(rl, "writ", 4), -1);
}

static void new_refuses_bad_options(void **state)
{
    gw_rl_spec_t spec;
    gw_rl_opts_t o;
    gw_rl_t *x = (gw_rl_t *)&o;

    (void)state;
    assert_int_equal(gw_rl_spec_parse("read=1/s", &spec, SVC_ERRBUF_SCRATCH), SVC_OK);
    gw_rl_opts_init(&o);
    assert_int_equal(o.capacity, GW_RL_DEFAULT_CAPACITY);
    assert_int_equal(o.shards, GW_RL_DEFAULT_SHARDS);
    assert_int_equal(gw_rl_new(&o, &x), SVC_EINVAL); /* no spec */
    assert_null(x);
    o.spec = &spec;
    o.capacity = GW_RL_MIN_CAPACITY - 1;
    assert_int_equal(gw_rl_new(&o, &x), SVC_EINVAL);
    o.capacity = GW_RL_MAX_CAPACITY + 1;
    assert_int_equal(gw_rl_new(&o, &x), SVC_EINVAL);
    o.capacity = 1000;
    o.shards = 3;
    assert_int_equal(gw_rl_new(&o, &x), SVC_EINVAL);
    spec.n = 0;
    o.shards = 4;
    assert_int_equal(gw_rl_new(&o, &x), SVC_EINVAL); /* "off": create none */
    /* shards are halved until each has 8 buckets; capacity rounds down */
    assert_int_equal(gw_rl_spec_parse("read=1/s", &spec, SVC_ERRBUF_SCRATCH), SVC_OK);
    o.capacity = 21;
    o.shards = 16;
    assert_int_equal(gw_rl_new(&o, &x), SVC_OK);
    rl = x;
    assert_int_equal(stats().capacity, 20); /* 2 shards of 10 */
}

static void spec_parser_good(void **state)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    gw_rl_spec_t s;

    (void)state;
    assert_int_equal(gw_rl_spec_parse("read=100/s,burst=200;write=10/s,burst=20", &s, errbuf),
                     SVC_OK);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.cls[0].name, "read");
    assert_false(s.cls[0].off);
    assert_int_equal(s.cls[0].count, 1);
    assert_int_equal(s.cls[0].per_ns, 10 * MS); /* 100/s: one per 10 ms */
    assert_int_equal(s.cls[0].burst, 200);
    assert_string_equal(s.cls[1].name, "write");
    assert_int_equal(s.cls[1].per_ns, 100 * MS);
    assert_int_equal(s.cls[1].burst, 20);

    assert_int_equal(gw_rl_spec_parse("  read = 0.5/s ;write=30 / m , burst = 7;  ", &s, errbuf),
                     SVC_OK);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.cls[0].count, 1);
    assert_int_equal(s.cls[0].per_ns, 2 * SEC);
    assert_int_equal(s.cls[0].burst, 1); /* default: 0.5 rounded up */
    assert_int_equal(s.cls[1].per_ns, 2 * SEC);
    assert_int_equal(s.cls[1].burst, 7);

    assert_int_equal(gw_rl_spec_parse("a=2.5/s;b=1000000/h;c_1-x=1.001/m", &s, errbuf), SVC_OK);
    assert_int_equal(s.cls[0].count, 1); /* 2.5/s: one per 400 ms */
    assert_int_equal(s.cls[0].per_ns, 400 * MS);
    assert_int_equal(s.cls[0].burst, 3);
    assert_int_equal(s.cls[1].burst, 1000000);
    assert_int_equal(s.cls[2].count, 1001);
    assert_int_equal(s.cls[2].per_ns, 60 * SEC * 1000); /* 1001 per 60,000 s */

    assert_int_equal(gw_rl_spec_parse("off", &s, errbuf), SVC_OK);
    assert_int_equal(s.n, 0);
    assert_int_equal(gw_rl_spec_parse(" off ", &s, errbuf), SVC_OK);
    assert_int_equal(s.n, 0);
    assert_int_equal(gw_rl_spec_parse("read=off;write=1/h", &s, errbuf), SVC_OK);
    assert_int_equal(s.n, 2);
    assert_true(s.cls[0].off);
    assert_false(s.cls[1].off);
    assert_int_equal(
        gw_rl_spec_parse("a=1/s;b=1/s;c=1/s;d=1/s;e=1/s;f=1/s;g=1/s;h=1/s", &s, errbuf), SVC_OK);
    assert_int_equal(s.n, GW_RL_MAX_CLASSES);
}

/* The parse fails, and the message has `part` in it. */
static void bad(const char *text, const char *part)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    gw_rl_spec_t s = {.n = 99};

    if (gw_rl_spec_parse(text, &s, errbuf) != SVC_EINVAL)
        fail_msg("\"%s\" was accepted", text);
    assert_int_equal(s.n, 99); /* untouched */
    if (strstr(errbuf, part) == NULL)
        fail_msg("\"%s\": \"%s\" does not name \"%s\"", text, errbuf, part);
}

static void spec_parser_bad(void **state)
{
    (void)state;
    bad("", "a class is name=rate");
    bad("read", "\"read\": a class is name=rate");
    bad("read=100/x", "\"read=100/x\": unknown unit \"/x\"");
    bad("read=100", "unknown unit \"/\"");
    bad("read=abc/s", "the rate \"abc\"");
    bad("read=0/s", "the rate \"0\"");
    bad("read=-1/s", "the rate \"-1\"");
    bad("read=1.2345/s", "at most 3 decimals");
    bad("read=1./s", "the rate \"1.\"");
    bad("read=.5/s", "the rate \".5\"");
    bad("read=1000001/s", "the rate \"1000001\"");
    bad("read=1/s,burst=0", "burst \"0\"");
    bad("read=1/s,burst=1.5", "burst \"1.5\"");
    bad("read=1/s,burst=1000001", "burst \"1000001\"");
    bad("read=1/s,bust=3", "unknown parameter \"bust\"");
    bad("read=1/s,", "\"read=1/s,\": unknown parameter \"\""); /* a burst left out? */
    bad("READ=1/s", "\"READ=1/s\": a class is name=rate");
    bad("abcdefghijklmnop=1/s", "the name 1 to 15");
    bad("=1/s", "\"=1/s\"");
    bad("read=1/s;;write=1/s", "\"\": a class is name=rate");
    bad("read=1/s;read=2/s", "class \"read\" is named twice");
    bad("a=1/s;b=1/s;c=1/s;d=1/s;e=1/s;f=1/s;g=1/s;h=1/s;i=1/s", "more than 8 classes");
    bad("read=0.001/h,burst=1000000", "\"read=0.001/h,burst=1000000\": rate and burst too large");
    bad("write=10/s,burst=20;read=off,burst=3", "\"read=off,burst=3\"");
}

static void header_strings(void **state)
{
    gw_rl_decision_t d;
    gw_rl_headers_t h;

    (void)state;
    make("read=100/s,burst=100;write=10/s,burst=20", 1024, 4);
    d = check("read", "ip:127.0.0.1", T0);
    gw_rl_headers_format(&d, &h);
    assert_string_equal(h.policy, "\"read\";q=100;w=1");
    assert_string_equal(h.ratelimit, "\"read\";r=99;t=1");
    assert_string_equal(h.retry_after, "");
    for (int i = 0; i < 20; i++)
        d = check("write", "sub:c1", T0);
    gw_rl_headers_format(&d, &h);
    assert_string_equal(h.ratelimit, "\"write\";r=0;t=2");
    d = check("write", "sub:c1", T0 + 50 * MS);
    gw_rl_headers_format(&d, &h);
    assert_false(d.allowed);
    assert_string_equal(h.policy, "\"write\";q=20;w=2");
    assert_string_equal(h.ratelimit, "\"write\";r=0;t=2");
    assert_string_equal(h.retry_after, "1");
    /* the longest values fit */
    d = (gw_rl_decision_t){false,      true,       "abcdefghijklmno", UINT64_MAX,
                           UINT64_MAX, UINT64_MAX, UINT64_MAX,        UINT64_MAX};
    gw_rl_headers_format(&d, &h);
    assert_string_equal(h.policy, "\"abcdefghijklmno\";q=18446744073709551615;w="
                                  "18446744073709551615");
    assert_string_equal(h.retry_after, "18446744073709551615");
}

static void metrics_text(void **state)
{
    static const char want[] =
        "# HELP gateway_ratelimit_allowed_total Requests let through by the rate limiter, by "
        "class.\n"
        "# TYPE gateway_ratelimit_allowed_total counter\n"
        "gateway_ratelimit_allowed_total{class=\"read\"} 2\n"
        "gateway_ratelimit_allowed_total{class=\"write\"} 1\n"
        "# HELP gateway_ratelimit_limited_total Requests answered 429 by the rate limiter, by "
        "class.\n"
        "# TYPE gateway_ratelimit_limited_total counter\n"
        "gateway_ratelimit_limited_total{class=\"read\"} 0\n"
        "gateway_ratelimit_limited_total{class=\"write\"} 3\n"
        "# HELP gateway_ratelimit_evictions_total Buckets forgotten to make room: full (no "
        "decision changed) or partial (the key got a fresh burst; raise "
        "GATEWAY_RATE_LIMIT_CAPACITY).\n"
        "# TYPE gateway_ratelimit_evictions_total counter\n"
        "gateway_ratelimit_evictions_total{state=\"full\"} 0\n"
        "gateway_ratelimit_evictions_total{state=\"partial\"} 0\n"
        "# HELP gateway_ratelimit_buckets Token buckets in use.\n"
        "# TYPE gateway_ratelimit_buckets gauge\n"
        "gateway_ratelimit_buckets 3\n"
        "# HELP gateway_ratelimit_buckets_max Token buckets at most "
        "(GATEWAY_RATE_LIMIT_CAPACITY).\n"
        "# TYPE gateway_ratelimit_buckets_max gauge\n"
        "gateway_ratelimit_buckets_max 1024\n";
    char buf[4096], small[64];
    size_t len = 0;

    (void)state;
    make("read=10/s;write=1/h,burst=1", 1024, 4);
    assert_true(allowed("read", "a", T0));
    assert_true(allowed("read", "b", T0));
    for (int i = 0; i < 4; i++)
        (void)allowed("write", "a", T0);
    assert_int_equal(gw_rl_render(rl, buf, sizeof buf, &len), SVC_OK);
    assert_string_equal(buf, want);
    assert_int_equal(len, strlen(want));
    /* too small: SVC_ERANGE, the full length, and still a string */
    assert_int_equal(gw_rl_render(rl, small, sizeof small, &len), SVC_ERANGE);
    assert_int_equal(len, strlen(want));
    assert_true(strlen(small) < sizeof small);
    assert_int_equal(gw_rl_render(rl, NULL, 0, &len), SVC_ERANGE);
    assert_int_equal(len, strlen(want));
}

static void address_keys(void **state)
{
    struct sockaddr_in in4 = {.sin_family = AF_INET};
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    char out[GW_RL_ADDR_KEY_MAX];

    (void)state;
    assert_int_equal(inet_pton(AF_INET, "192.0.2.7", &in4.sin_addr), 1);
    assert_int_equal(gw_rl_addr_key((struct sockaddr *)&in4, out, sizeof out), 12);
    assert_string_equal(out, "ip:192.0.2.7");
    /* the whole /64 is one key */
    assert_int_equal(inet_pton(AF_INET6, "2001:db8:0:1:aaaa::1", &in6.sin6_addr), 1);
    assert_true(gw_rl_addr_key((struct sockaddr *)&in6, out, sizeof out) > 0);
    assert_string_equal(out, "ip6:2001:db8:0:1");
    assert_int_equal(inet_pton(AF_INET6, "2001:db8:0:1:ffff:1:2:3", &in6.sin6_addr), 1);
    assert_true(gw_rl_addr_key((struct sockaddr *)&in6, out, sizeof out) > 0);
    assert_string_equal(out, "ip6:2001:db8:0:1");
    assert_int_equal(inet_pton(AF_INET6, "::ffff:192.0.2.7", &in6.sin6_addr), 1);
    assert_true(gw_rl_addr_key((struct sockaddr *)&in6, out, sizeof out) > 0);
    assert_string_equal(out, "ip:192.0.2.7");
    assert_int_equal(inet_pton(AF_INET6, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", &in6.sin6_addr),
                     1);
    assert_true(gw_rl_addr_key((struct sockaddr *)&in6, out, sizeof out) > 0);
    assert_string_equal(out, "ip6:ffff:ffff:ffff:ffff");
    assert_int_equal(gw_rl_addr_key((struct sockaddr *)&un, out, sizeof out), 0);
    assert_int_equal(gw_rl_addr_key((struct sockaddr *)&in4, out, 12), 0); /* no room for NUL */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(burst_then_refusal, teardown),
        cmocka_unit_test_teardown(refill_after_exactly_the_right_time, teardown),
        cmocka_unit_test_teardown(fractional_rates, teardown),
        cmocka_unit_test_teardown(retry_after_and_reset_rounding, teardown),
        cmocka_unit_test_teardown(keys_and_classes_are_independent, teardown),
        cmocka_unit_test_teardown(eviction_at_capacity_prefers_full_buckets, teardown),
        cmocka_unit_test_teardown(eviction_without_full_buckets_takes_the_least_recent, teardown),
        cmocka_unit_test_teardown(table_never_grows, teardown),
        cmocka_unit_test_teardown(long_keys_are_folded_not_merged, teardown),
        cmocka_unit_test_teardown(time_behind_the_bucket_adds_nothing, teardown),
        cmocka_unit_test_teardown(off_class_and_bad_calls, teardown),
        cmocka_unit_test_teardown(new_refuses_bad_options, teardown),
        cmocka_unit_test(spec_parser_good),
        cmocka_unit_test(spec_parser_bad),
        cmocka_unit_test_teardown(header_strings, teardown),
        cmocka_unit_test_teardown(metrics_text, teardown),
        cmocka_unit_test(address_keys),
    };

    return svc_test_run_group_tests_name("gateway_ratelimit", tests, NULL, NULL);
}
