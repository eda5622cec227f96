/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_notify_dlq.c - the real notify-dlq binary against a real RabbitMQ
 * node of the test's own (mq_it.h; one start for the file). Jobs reach
 * B.dead the real way (rmq_publish to the work queue, rmq_consumer_next,
 * some through a retry tier, rmq_consumer_dead), then each verb is run and
 * the queues are looked at directly: list leaves depth and order alone,
 * show prints the body and exits 1 for an unknown id, replay moves exactly
 * one (or all) to B.work with the tiers reset, purge refuses without --yes.
 * dlq.c's pure parts are tests/unit/services/notification/dlq/test_dlq.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "mq_it.h"
#include "support/group.h"
#include "support/spawn.h"

static mq_it_node_t node;

static int group_up(void **state)
{
    double secs = 0;

    (void)state;
    if (mq_it_node(&node, "start", &secs) != SVC_OK)
        return -1;
    fprintf(stderr, "dlq_it: node on 127.0.0.1:%d up in %.1f s\n", node.port, secs);
    return 0;
}

static int group_down(void **state)
{
    (void)state;
    mq_it_node_cleanup(&node);
    return 0;
}

/* ------------------------------------------------------------------------
 * Putting jobs in B.dead the way the service does
 * ------------------------------------------------------------------------ */

typedef struct job {
    const char *id, *reason;
    int status, attempts;
    bool via_tier; /* through B.retry.1 first: it carries x-death */
} job_t;

static const uint32_t tier_ms[] = {200};

static void topology(rmq_topology_t *t, const char *base)
{
    t->base = base;
    t->tier_delay_ms = tier_ms;
    t->n_tiers = 1;
}

static void body_of(const char *id, char *out, size_t cap)
{
    snprintf(out, cap,
             "{\"id\":\"%s\",\"type\":\"shopmicro.order.confirmed.v1\",\"data\":"
             "{\"orderId\":\"o-1\",\"items\":[]}}",
             id);
}

static rmq_delivery_t *next(rmq_consumer_t *k)
{
    rmq_delivery_t *d = NULL;
    char err[SVC_ERRBUF_LEN] = "";
    svc_err_t e = rmq_consumer_next(k, mq_it_ms(10000), &d, err);

    if (e != SVC_OK)
        fail_msg("rmq_consumer_next: %s %s", svc_err_name(e), err);
    return d;
}

static void fill_dead(const rmq_topology_t *t, const job_t *jobs, size_t n)
{
    const rmq_header_t h[] = {{"x-test", "yes"}};
    rmq_consumer_opts_t ko;
    rmq_conn_opts_t o;
    rmq_conn_t *c = NULL;
    rmq_consumer_t *k = NULL;
    char err[SVC_ERRBUF_LEN] = "", body[256];

    mq_it_conn_opts(&node, &o);
    if (rmq_conn_new(&o, &c, err) != SVC_OK || rmq_topology_declare(c, t, err) != SVC_OK)
        fail_msg("connect/declare: %s", err);
    rmq_consumer_opts_init(&ko);
    ko.conn = o;
    ko.topology = t;
    ko.prefetch = 1;
    if (rmq_consumer_new(&ko, &k, err) != SVC_OK)
        fail_msg("rmq_consumer_new: %s", err);
    /* One at a time, so that B.dead gets them in this order. */
    for (size_t i = 0; i < n; i++) {
        rmq_message_t m = {.message_id = jobs[i].id,
                           .content_type = "application/cloudevents+json",
                           .headers = h,
                           .n_headers = 1};
        rmq_dead_info_t why = {.final_reason = jobs[i].reason,
                               .last_http_status = jobs[i].status,
                               .attempts = jobs[i].attempts};
        rmq_delivery_t *d;

        body_of(jobs[i].id, body, sizeof body);
        m.body = body;
        m.body_len = strlen(body);
        if (rmq_publish(c, t, &m, err) != SVC_OK)
            fail_msg("publish %s: %s", jobs[i].id, err);
        d = next(k);
        assert_string_equal(rmq_delivery_message_id(d), jobs[i].id);
        if (jobs[i].via_tier) {
            if (rmq_consumer_retry(k, d, 1, 1, err) != SVC_OK)
                fail_msg("retry %s: %s", jobs[i].id, err);
            rmq_delivery_free(d);
            d = next(k);
            assert_int_equal(rmq_delivery_tier_passes(d), 1);
        }
        if (rmq_consumer_dead(k, d, &why, err) != SVC_OK)
            fail_msg("dead %s: %s", jobs[i].id, err);
        rmq_delivery_free(d);
    }
    rmq_consumer_free(k);
    rmq_conn_free(c);
}

static long depth(const rmq_topology_t *t, rmq_name_kind_t kind)
{
    char q[RMQ_NAME_MAX];

    rmq_topology_name(t, kind, 0, q);
    return mq_it_depth(&node, q);
}

/* Takes every message of the queue (acked: gone) and checks their ids in
 * order. */
static void drain_expect(const rmq_topology_t *t, rmq_name_kind_t kind, const char *const *ids,
                         size_t n)
{
    char q[RMQ_NAME_MAX], id[256];

    rmq_topology_name(t, kind, 0, q);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(mq_it_get(&node, q, id, sizeof id, NULL, NULL, 0), 0);
        assert_string_equal(id, ids[i]);
    }
    assert_int_equal(mq_it_depth(&node, q), 0);
}

/* ------------------------------------------------------------------------
 * Running the real binary
 * ------------------------------------------------------------------------ */

typedef struct cli {
    int code;   /* exit status; -1 when it did not exit */
    char *text; /* stdout+stderr, owned (free) */
} cli_t;

static cli_t run_cli_port(int port, const char *base, const char *const *args)
{
    const char *bin = getenv("NOTIFY_DLQ_BIN");
    const char *argv[12] = {bin};
    char port_env[64], base_env[200], log[512], errbuf[SVC_ERRBUF_LEN] = "";
    const char *env[] = {port_env, base_env, "NOTIFY_LOG_LEVEL", NULL};
    spawn_opts_t o;
    cli_t r = {.code = -1};
    int wstatus = -1;
    size_t n = 1;
    FILE *f;

    assert_non_null(bin);
    for (; args[n - 1] != NULL && n < 11; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    snprintf(port_env, sizeof port_env, "NOTIFY_RABBITMQ_PORT=%d", port);
    snprintf(base_env, sizeof base_env, "NOTIFY_QUEUE_BASE=%s", base);
    spawn_opts_init(&o);
    o.path = bin;
    o.argv = argv;
    o.env = env;
    spawn_log_path_make("notify-dlq", log, sizeof log);
    o.log_path = log;
    if (spawn_run(&o, mq_it_ms(30000), &wstatus, errbuf) != SVC_OK)
        fail_msg("notify-dlq did not run: %s", errbuf);
    if (WIFEXITED(wstatus))
        r.code = WEXITSTATUS(wstatus);
    f = fopen(log, "r");
    assert_non_null(f);
    r.text = calloc(1, 1 << 20);
    assert_non_null(r.text);
    (void)fread(r.text, 1, (1 << 20) - 1, f);
    fclose(f);
    fprintf(stderr, "dlq_it: $ notify-dlq");
    for (size_t i = 1; argv[i] != NULL; i++)
        fprintf(stderr, " %s", argv[i]);
    fprintf(stderr, "   (NOTIFY_QUEUE_BASE=%s) -> exit %d\n%s", base, r.code, r.text);
    return r;
}

static cli_t run_cli(const char *base, const char *const *args)
{
    return run_cli_port(node.port, base, args);
}

/* The line of the output that starts with id, or NULL. */
static const char *line_of(const char *text, const char *id)
{
    size_t n = strlen(id);

    for (const char *p = text; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p ? p + 1 : p)
        if (strncmp(p, id, n) == 0 && p[n] == ' ')
            return p;
    return NULL;
}

/* The words of a list line: id, reason, http, attempts, bytes, died. */
static void expect_list_line(const char *text, const job_t *j)
{
    const char *p = line_of(text, j->id);
    char id[128], reason[64], http[16], attempts[16], died[64];
    size_t bytes = 0;
    char status[16], att[16], body[256];

    assert_non_null(p);
    assert_int_equal(
        sscanf(p, "%127s %63s %15s %15s %zu %63s", id, reason, http, attempts, &bytes, died), 6);
    snprintf(status, sizeof status, "%d", j->status);
    snprintf(att, sizeof att, "%d", j->attempts);
    body_of(j->id, body, sizeof body);
    assert_string_equal(reason, j->reason);
    assert_string_equal(http, status);
    assert_string_equal(attempts, att);
    assert_int_equal(bytes, strlen(body));
    assert_true(strlen(died) >= 20 && died[4] == '-' && died[10] == 'T'); /* RFC 3339 */
}

/* ------------------------------------------------------------------------
 * The verbs
 * ------------------------------------------------------------------------ */

static const job_t three[] = {
    {"11111111-1111-4111-8111-111111111111", "attempts_exhausted", 503, 12, true},
    {"22222222-2222-4222-8222-222222222222", "circuit_open", 0, 4, false},
    {"33333333-3333-4333-8333-333333333333", "client_error", 400, 1, true},
};
static const char *const three_ids[] = {three[0].id, three[1].id, three[2].id};

static void list_shows_each_and_leaves_the_queue(void **state)
{
    rmq_topology_t t;
    cli_t r;

    (void)state;
    topology(&t, "it.dlq.list");
    fill_dead(&t, three, 3);
    r = run_cli(t.base, (const char *[]){"list", NULL});
    assert_int_equal(r.code, 0);
    for (size_t i = 0; i < 3; i++)
        expect_list_line(r.text, &three[i]);
    /* One line per job, in the queue's order. */
    assert_true(line_of(r.text, three[0].id) < line_of(r.text, three[1].id));
    assert_true(line_of(r.text, three[1].id) < line_of(r.text, three[2].id));
    assert_non_null(strstr(r.text, "3 dead jobs in it.dlq.list.dead\n"));
    free(r.text);
    assert_int_equal(depth(&t, RMQ_NAME_DEAD), 3);
    r = run_cli(t.base, (const char *[]){"list", "--limit", "2", NULL});
    assert_int_equal(r.code, 0);
    assert_non_null(line_of(r.text, three[1].id));
    assert_null(line_of(r.text, three[2].id));
    assert_non_null(strstr(r.text, "3 dead jobs in it.dlq.list.dead; the first 2 listed"));
    free(r.text);
    /* Nothing lost, nothing reordered by two lists (the second one held
     * only the first two and put them back in front of the third). */
    assert_int_equal(depth(&t, RMQ_NAME_WORK), 0);
    drain_expect(&t, RMQ_NAME_DEAD, three_ids, 3);
    r = run_cli(t.base, (const char *[]){"list", NULL});
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.text, "0 dead jobs in it.dlq.list.dead\n"));
    free(r.text);
}

static void show_prints_one_or_exits_1(void **state)
{
    rmq_topology_t t;
    char body[256];
    cli_t r;

    (void)state;
    topology(&t, "it.dlq.show");
    fill_dead(&t, three, 3);
    r = run_cli(t.base, (const char *[]){"show", three[1].id, NULL});
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.text, "message-id:   22222222-2222-4222-8222-222222222222\n"));
    assert_non_null(strstr(r.text, "content-type: application/cloudevents+json\n"));
    assert_non_null(strstr(r.text, "  x-shopmicro-final-reason: circuit_open\n"));
    assert_non_null(strstr(r.text, "  x-shopmicro-last-http-status: 0\n"));
    assert_non_null(strstr(r.text, "  x-test: yes\n"));
    body_of(three[1].id, body, sizeof body);
    assert_non_null(strstr(r.text, "body (119 bytes):\n{\n  \"id\": \"22222222-"));
    assert_int_equal(strlen(body), 119);
    assert_non_null(strstr(r.text, "    \"items\": []\n"));
    free(r.text);
    /* A job that went through a tier shows the broker's x-death. */
    r = run_cli(t.base, (const char *[]){"show", three[0].id, NULL});
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.text, "  x-death: [{"));
    assert_non_null(strstr(r.text, "queue=it.dlq.show.retry.1"));
    free(r.text);
    r = run_cli(t.base, (const char *[]){"show", "no-such-id", NULL});
    assert_int_equal(r.code, 1);
    assert_non_null(
        strstr(r.text, "no job with message-id no-such-id in it.dlq.show.dead (3 jobs"));
    free(r.text);
    drain_expect(&t, RMQ_NAME_DEAD, three_ids, 3);
}

static void replay_one_moves_exactly_that_one_with_tiers_reset(void **state)
{
    const char *names[] = {RMQ_HDR_RETRIES,  RMQ_HDR_FINAL_REASON, RMQ_HDR_HTTP_STATUS,
                           RMQ_HDR_ATTEMPTS, RMQ_HDR_DEAD_AT,      "x-test"};
    const char *const rest[] = {three[1].id, three[2].id};
    char values[6][RMQ_HEADER_VALUE_MAX], id[256], q[RMQ_NAME_MAX];
    rmq_topology_t t;
    cli_t r;

    (void)state;
    topology(&t, "it.dlq.replay1");
    fill_dead(&t, three, 3);
    r = run_cli(t.base, (const char *[]){"replay", three[0].id, NULL});
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.text, "replayed 11111111-1111-4111-8111-111111111111 -> exchange "
                                   "it.dlq.replay1, key work (it.dlq.replay1.work)\n"));
    assert_non_null(strstr(r.text, "1 job replayed\n"));
    free(r.text);
    assert_int_equal(depth(&t, RMQ_NAME_DEAD), 2);
    assert_int_equal(depth(&t, RMQ_NAME_WORK), 1);
    rmq_topology_name(&t, RMQ_NAME_WORK, 0, q);
    assert_int_equal(mq_it_get(&node, q, id, sizeof id, names, values, 6), 0);
    assert_string_equal(id, three[0].id);
    assert_string_equal(values[0], "0");
    assert_string_equal(values[1], "");
    assert_string_equal(values[2], "");
    assert_string_equal(values[3], "");
    assert_string_equal(values[4], "");
    assert_string_equal(values[5], "yes");
    /* The rest in their order; an unknown id replays nothing. */
    r = run_cli(t.base, (const char *[]){"replay", "no-such-id", NULL});
    assert_int_equal(r.code, 1);
    free(r.text);
    drain_expect(&t, RMQ_NAME_DEAD, rest, 2);
}

/* The replayed job as the service's consumer sees it: no retry pass
 * counted (x-death dropped with the rest), so it gets every tier again. */
static void replayed_job_gets_every_tier_again(void **state)
{
    rmq_consumer_opts_t ko;
    rmq_consumer_t *k = NULL;
    rmq_delivery_t *d;
    rmq_topology_t t;
    char err[SVC_ERRBUF_LEN] = "";
    cli_t r;

    (void)state;
    topology(&t, "it.dlq.tiers");
    fill_dead(&t, three, 1); /* through tier 1: x-death count 1 */
    r = run_cli(t.base, (const char *[]){"replay", three[0].id, NULL});
    assert_int_equal(r.code, 0);
    free(r.text);
    rmq_consumer_opts_init(&ko);
    mq_it_conn_opts(&node, &ko.conn);
    ko.topology = &t;
    if (rmq_consumer_new(&ko, &k, err) != SVC_OK)
        fail_msg("rmq_consumer_new: %s", err);
    d = next(k);
    assert_string_equal(rmq_delivery_message_id(d), three[0].id);
    assert_int_equal(rmq_delivery_xdeath_tiers(d), 0);
    assert_int_equal(rmq_delivery_tier_passes(d), 0);
    assert_int_equal(rmq_tier_next(rmq_delivery_tier_passes(d), t.n_tiers), 1);
    assert_int_equal(rmq_consumer_ack(k, d, SVC_ERRBUF_SCRATCH), SVC_OK);
    rmq_delivery_free(d);
    rmq_consumer_free(k);
}

static void replay_all_moves_every_one_in_order(void **state)
{
    rmq_topology_t t;
    cli_t r;

    (void)state;
    topology(&t, "it.dlq.replayall");
    fill_dead(&t, three, 3);
    r = run_cli(t.base, (const char *[]){"replay", "--all", NULL});
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.text, "3 jobs replayed\n"));
    free(r.text);
    assert_int_equal(depth(&t, RMQ_NAME_DEAD), 0);
    drain_expect(&t, RMQ_NAME_WORK, three_ids, 3);
    r = run_cli(t.base, (const char *[]){"replay", "--all", NULL});
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.text, "0 jobs replayed\n"));
    free(r.text);
}

static void purge_needs_yes(void **state)
{
    rmq_topology_t t;
    cli_t r;

    (void)state;
    topology(&t, "it.dlq.purge");
    fill_dead(&t, three, 2);
    r = run_cli(t.base, (const char *[]){"purge", NULL});
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.text, "purge removes the 2 jobs of it.dlq.purge.dead for good"));
    free(r.text);
    assert_int_equal(depth(&t, RMQ_NAME_DEAD), 2);
    r = run_cli(t.base, (const char *[]){"purge", "--yes", NULL});
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.text, "purged 2 jobs from it.dlq.purge.dead\n"));
    free(r.text);
    assert_int_equal(depth(&t, RMQ_NAME_DEAD), 0);
}

static void failures_are_named(void **state)
{
    int closed = spawn_free_port();
    cli_t r;

    (void)state;
    r = run_cli("it.dlq.never.declared", (const char *[]){"list", NULL});
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.text, "queue it.dlq.never.declared.dead is not declared"));
    assert_non_null(strstr(r.text, "start the notification service first"));
    free(r.text);
    r = run_cli("it.dlq.never.declared", (const char *[]){"purge", NULL});
    assert_int_equal(r.code, 1);
    free(r.text);
    assert_true(closed > 0);
    r = run_cli_port(closed, "it.dlq.list", (const char *[]){"list", NULL});
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.text, "unreachable"));
    free(r.text);
    r = run_cli("it.dlq.list", (const char *[]){"replay", NULL});
    assert_int_equal(r.code, 2);
    free(r.text);
    r = run_cli("it.dlq.list", (const char *[]){"--help", NULL});
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.text, "NOTIFY_QUEUE_BASE"));
    free(r.text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(list_shows_each_and_leaves_the_queue),
        cmocka_unit_test(show_prints_one_or_exits_1),
        cmocka_unit_test(replay_one_moves_exactly_that_one_with_tiers_reset),
        cmocka_unit_test(replayed_job_gets_every_tier_again),
        cmocka_unit_test(replay_all_moves_every_one_in_order),
        cmocka_unit_test(purge_needs_yes),
        cmocka_unit_test(failures_are_named),
    };
    return svc_test_run_group_tests_name("notify_dlq", tests, group_up, group_down);
}
