/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_mq_broker.c - pkg/mq against a real RabbitMQ node of the test's own
 * (mq_it.h): connect failures; the topology declared twice and with other
 * arguments; a publish confirmed, consumed and acked; a channel error under
 * a consumer; unroutable mandatory publishes; a job through a short retry
 * tier and on to the dead-letter queue; a consumer killed before its ack;
 * idle connections and heartbeats; and kill -9 of the node with persistent
 * jobs queued (last: it restarts the node).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mq_it.h"
#include "support/group.h"
#include "support/spawn.h"

#define CRASH_JOBS 200

static mq_it_node_t node;

static int group_up(void **state)
{
    double secs = 0;

    (void)state;
    if (mq_it_node(&node, "start", &secs) != SVC_OK)
        return -1;
    fprintf(stderr, "mq_it: node on 127.0.0.1:%d up in %.1f s\n", node.port, secs);
    return 0;
}

static int group_down(void **state)
{
    (void)state;
    mq_it_node_cleanup(&node);
    return 0;
}

static rmq_conn_t *conn_new(void)
{
    rmq_conn_opts_t o;
    rmq_conn_t *c = NULL;
    char err[SVC_ERRBUF_LEN] = "";

    mq_it_conn_opts(&node, &o);
    if (rmq_conn_new(&o, &c, err) != SVC_OK)
        fail_msg("rmq_conn_new: %s", err);
    return c;
}

static rmq_consumer_t *consumer_new(const rmq_topology_t *t, int prefetch)
{
    rmq_consumer_opts_t o;
    rmq_consumer_t *c = NULL;
    char err[SVC_ERRBUF_LEN] = "";

    rmq_consumer_opts_init(&o);
    mq_it_conn_opts(&node, &o.conn);
    o.topology = t;
    o.prefetch = prefetch;
    if (rmq_consumer_new(&o, &c, err) != SVC_OK)
        fail_msg("rmq_consumer_new: %s", err);
    return c;
}

static void declare(rmq_conn_t *c, const rmq_topology_t *t)
{
    char err[SVC_ERRBUF_LEN] = "";

    if (rmq_topology_declare(c, t, err) != SVC_OK)
        fail_msg("declare %s: %s", t->base, err);
}

static void publish(rmq_conn_t *c, const rmq_topology_t *t, const char *id, const char *body)
{
    const rmq_header_t h[] = {{"x-test", "yes"}};
    rmq_message_t m = {.body = body,
                       .body_len = strlen(body),
                       .message_id = id,
                       .content_type = "text/plain",
                       .headers = h,
                       .n_headers = 1};
    char err[SVC_ERRBUF_LEN] = "";
    svc_err_t e = rmq_publish(c, t, &m, err);

    if (e != SVC_OK)
        fail_msg("publish %s: %s %s", id, svc_err_name(e), err);
}

static rmq_delivery_t *next(rmq_consumer_t *c, int ms)
{
    rmq_delivery_t *d = NULL;
    char err[SVC_ERRBUF_LEN] = "";
    svc_err_t e = rmq_consumer_next(c, mq_it_ms(ms), &d, err);

    if (e != SVC_OK)
        fail_msg("rmq_consumer_next: %s %s", svc_err_name(e), err);
    return d;
}

static char *name_of(const rmq_topology_t *t, rmq_name_kind_t k, unsigned tier, char *buf)
{
    rmq_topology_name(t, k, tier, buf);
    return buf;
}

/* What a caller sees when it cannot connect: each failure its own code. */
static void connect_failures_are_named(void **state)
{
    rmq_conn_opts_t o;
    rmq_conn_t *c = NULL;
    char err[SVC_ERRBUF_LEN] = "";
    svc_err_t e;

    (void)state;
    mq_it_conn_opts(&node, &o);
    o.port = spawn_free_port(); /* nothing listens there */
    assert_true(o.port > 0);
    e = rmq_conn_new(&o, &c, err);
    fprintf(stderr, "mq_it: closed port: %s %s\n", svc_err_name(e), err);
    assert_int_equal(e, SVC_EUNAVAIL);
    assert_null(c);
    mq_it_conn_opts(&node, &o);
    o.password = "wrong";
    e = rmq_conn_new(&o, &c, err);
    fprintf(stderr, "mq_it: wrong password: %s %s\n", svc_err_name(e), err);
    assert_int_equal(e, SVC_EUNAUTH);
    mq_it_conn_opts(&node, &o);
    o.vhost = "no-such-vhost";
    e = rmq_conn_new(&o, &c, err);
    fprintf(stderr, "mq_it: unknown vhost: %s %s\n", svc_err_name(e), err);
    assert_int_equal(e, SVC_EPERM);
    assert_null(c);
}

static void topology_twice_is_a_noop(void **state)
{
    const uint32_t delays[] = {200, 400};
    rmq_topology_t t = {.base = "it.twice", .tier_delay_ms = delays, .n_tiers = 2};
    rmq_conn_t *c = conn_new();
    char q[RMQ_NAME_MAX];

    (void)state;
    declare(c, &t);
    publish(c, &t, "twice-1", "kept");
    declare(c, &t); /* a second start: nothing changes, nothing is lost */
    assert_true(rmq_conn_alive(c));
    assert_int_equal(mq_it_depth(&node, name_of(&t, RMQ_NAME_WORK, 0, q)), 1);
    assert_int_equal(mq_it_depth(&node, name_of(&t, RMQ_NAME_TIER, 2, q)), 0);
    assert_int_equal(mq_it_depth(&node, name_of(&t, RMQ_NAME_DEAD, 0, q)), 0);
    rmq_conn_free(c);
}

static void topology_other_arguments_is_named(void **state)
{
    const uint32_t delays[] = {200, 400}, other[] = {300, 400};
    rmq_topology_t t = {.base = "it.args", .tier_delay_ms = delays, .n_tiers = 2};
    rmq_topology_t t2 = {.base = "it.args", .tier_delay_ms = other, .n_tiers = 2};
    rmq_conn_t *c = conn_new();
    char err[SVC_ERRBUF_LEN] = "";

    (void)state;
    declare(c, &t);
    assert_int_equal(rmq_topology_declare(c, &t2, err), SVC_EPRECOND);
    fprintf(stderr, "mq_it: other arguments: %s\n", err);
    assert_non_null(strstr(err, "it.args.retry.1"));
    assert_non_null(strstr(err, "x-message-ttl"));
    /* The broker closed the channel; the module reopened it. */
    assert_true(rmq_conn_alive(c));
    declare(c, &t);
    publish(c, &t, "args-1", "after the error");
    rmq_conn_free(c);
}

static void publish_consume_ack(void **state)
{
    rmq_topology_t t = {.base = "it.basic"};
    rmq_conn_t *c = conn_new();
    rmq_consumer_t *k;
    rmq_delivery_t *d, *none = NULL;
    const void *body;
    size_t len;
    char q[RMQ_NAME_MAX];

    (void)state;
    declare(c, &t);
    publish(c, &t, "basic-1", "hello");
    k = consumer_new(&t, 4);
    d = next(k, 10000);
    body = rmq_delivery_body(d, &len);
    assert_int_equal(len, 5);
    assert_memory_equal(body, "hello", 5);
    assert_string_equal(rmq_delivery_message_id(d), "basic-1");
    assert_string_equal(rmq_delivery_content_type(d), "text/plain");
    assert_string_equal(rmq_delivery_header(d, "x-test"), "yes");
    assert_null(rmq_delivery_header(d, "x-absent"));
    assert_false(rmq_delivery_redelivered(d));
    assert_int_equal(rmq_delivery_tier_passes(d), 0);
    assert_int_equal(rmq_consumer_ack(k, d, SVC_ERRBUF_SCRATCH), SVC_OK);
    rmq_delivery_free(d);
    assert_int_equal(rmq_consumer_next(k, 300, &none, SVC_ERRBUF_SCRATCH), SVC_ETIMEDOUT);
    assert_null(none);
    rmq_consumer_free(k);
    /* Acked means gone, also after the consumer left. */
    assert_int_equal(mq_it_depth(&node, name_of(&t, RMQ_NAME_WORK, 0, q)), 0);
    rmq_conn_free(c);
}

/* A channel error on the consuming side (here: a second ack of one tag,
 * 406 unknown delivery tag) ends the consumer; it must say so rather than
 * wait for deliveries on a channel without its basic.consume. */
static void consumer_channel_error_is_reported(void **state)
{
    rmq_topology_t t = {.base = "it.chanerr"};
    rmq_conn_t *c = conn_new();
    rmq_consumer_t *k;
    rmq_delivery_t *d, *none = NULL;
    char err[SVC_ERRBUF_LEN] = "";

    (void)state;
    declare(c, &t);
    publish(c, &t, "chanerr-1", "job");
    k = consumer_new(&t, 1);
    d = next(k, 10000);
    assert_int_equal(rmq_consumer_ack(k, d, SVC_ERRBUF_SCRATCH), SVC_OK);
    assert_int_equal(rmq_consumer_ack(k, d, SVC_ERRBUF_SCRATCH),
                     SVC_OK); /* acks are not answered */
    rmq_delivery_free(d);
    assert_int_equal(rmq_consumer_next(k, mq_it_ms(10000), &none, err), SVC_EUNAVAIL);
    fprintf(stderr, "mq_it: consumer after a channel error: %s\n", err);
    assert_non_null(strstr(err, "406"));
    assert_false(rmq_consumer_alive(k));
    assert_null(none);
    rmq_consumer_free(k);
    rmq_conn_free(c);
}

static void unroutable_is_an_error(void **state)
{
    rmq_topology_t t = {.base = "it.route"};
    rmq_message_t m = {.body = "x", .body_len = 1, .message_id = "route-1"};
    rmq_conn_t *c = conn_new();
    char err[SVC_ERRBUF_LEN] = "";

    (void)state;
    declare(c, &t);
    assert_int_equal(rmq_publish_to(c, "it.route", "no-such-key", &m, err), SVC_ENOTFOUND);
    assert_non_null(strstr(err, "NO_ROUTE"));
    assert_int_equal(rmq_publish_to(c, "", "no.such.queue", &m, err), SVC_ENOTFOUND);
    /* A missing exchange closes the channel (404); the connection goes on. */
    assert_int_equal(rmq_publish_to(c, "no.such.exchange", "k", &m, err), SVC_ENOTFOUND);
    assert_true(rmq_conn_alive(c));
    publish(c, &t, "route-2", "routable");
    rmq_conn_free(c);
}

static void retry_tier_then_dead_letter(void **state)
{
    const uint32_t delays[] = {200};
    rmq_topology_t t = {.base = "it.retry", .tier_delay_ms = delays, .n_tiers = 1};
    rmq_dead_info_t why = {
        .final_reason = "attempts_exhausted", .last_http_status = 503, .attempts = 6};
    const char *names[] = {RMQ_HDR_FINAL_REASON, RMQ_HDR_HTTP_STATUS, RMQ_HDR_ATTEMPTS, "x-test"};
    char values[4][RMQ_HEADER_VALUE_MAX], id[64], q[RMQ_NAME_MAX], err[SVC_ERRBUF_LEN] = "";
    rmq_conn_t *c = conn_new();
    rmq_consumer_t *k;
    rmq_delivery_t *d;
    unsigned tier;

    (void)state;
    declare(c, &t);
    publish(c, &t, "retry-1", "job");
    k = consumer_new(&t, 1);
    d = next(k, 10000);
    tier = rmq_tier_next(rmq_delivery_tier_passes(d), t.n_tiers);
    assert_int_equal(tier, 1);
    if (rmq_consumer_retry(k, d, tier, 1, err) != SVC_OK)
        fail_msg("retry: %s", err);
    rmq_delivery_free(d);
    /* 200 ms in the tier, then back on the work queue by dead-lettering. */
    d = next(k, 10000);
    assert_string_equal(rmq_delivery_message_id(d), "retry-1");
    assert_int_equal(rmq_delivery_xdeath_tiers(d), 1);
    assert_int_equal(rmq_delivery_tier_passes(d), 1);
    assert_string_equal(rmq_delivery_header(d, RMQ_HDR_RETRIES), "1");
    assert_string_equal(rmq_delivery_header(d, "x-test"), "yes");
    assert_int_equal(rmq_tier_next(rmq_delivery_tier_passes(d), t.n_tiers), 0);
    if (rmq_consumer_dead(k, d, &why, err) != SVC_OK)
        fail_msg("dead: %s", err);
    rmq_delivery_free(d);
    rmq_consumer_free(k);
    assert_int_equal(mq_it_depth(&node, name_of(&t, RMQ_NAME_WORK, 0, q)), 0);
    assert_int_equal(mq_it_depth(&node, name_of(&t, RMQ_NAME_DEAD, 0, q)), 1);
    assert_int_equal(mq_it_get(&node, q, id, sizeof id, names, values, 4), 0);
    assert_string_equal(id, "retry-1");
    assert_string_equal(values[0], "attempts_exhausted");
    assert_string_equal(values[1], "503");
    assert_string_equal(values[2], "6");
    assert_string_equal(values[3], "yes");
    rmq_conn_free(c);
}

/* The child takes one delivery, says so on the pipe and waits to be
 * killed: a worker that crashes mid-job. */
static void crash_child(const rmq_topology_t *t, int wfd)
{
    rmq_consumer_t *k = consumer_new(t, 1);
    rmq_delivery_t *d = next(k, 10000);

    (void)d;
    if (write(wfd, "1", 1) != 1)
        _exit(3);
    pause();
    _exit(4);
}

static void unacked_is_redelivered(void **state)
{
    rmq_topology_t t = {.base = "it.crash"};
    rmq_conn_t *c = conn_new();
    rmq_consumer_t *k;
    rmq_delivery_t *d;
    int fds[2], wstatus = 0;
    char b = 0;
    pid_t pid;

    (void)state;
    declare(c, &t);
    publish(c, &t, "crash-1", "job");
    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        crash_child(&t, fds[1]);
    }
    close(fds[1]);
    assert_int_equal(read(fds[0], &b, 1), 1);
    close(fds[0]);
    kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, &wstatus, 0), pid);
    assert_true(WIFSIGNALED(wstatus));
    k = consumer_new(&t, 1);
    d = next(k, 15000);
    assert_string_equal(rmq_delivery_message_id(d), "crash-1");
    assert_true(rmq_delivery_redelivered(d));
    assert_int_equal(rmq_consumer_ack(k, d, SVC_ERRBUF_SCRATCH), SVC_OK);
    rmq_delivery_free(d);
    rmq_consumer_free(k);
    rmq_conn_free(c);
}

static rmq_conn_t *conn_hb1(rmq_conn_opts_t *o)
{
    rmq_conn_t *c = NULL;
    char err[SVC_ERRBUF_LEN] = "";

    mq_it_conn_opts(&node, o);
    o->heartbeat_s = 1;
    if (rmq_conn_new(o, &c, err) != SVC_OK)
        fail_msg("rmq_conn_new: %s", err);
    return c;
}

/* Heartbeat 1 s, 6 s idle: served connections (keepalive; a consumer's
 * moves connection served by next) stay up, an unserved one is closed by
 * the broker and says so. */
static void idle_connections_kept_alive(void **state)
{
    const uint32_t delays[] = {200};
    rmq_topology_t t = {.base = "it.idle", .tier_delay_ms = delays, .n_tiers = 1};
    rmq_consumer_opts_t ko;
    rmq_conn_opts_t o;
    rmq_conn_t *c = conn_hb1(&o), *lazy = conn_hb1(&o);
    rmq_consumer_t *k = NULL;
    rmq_delivery_t *d = NULL;
    rmq_message_t m = {.body = "x", .body_len = 1, .message_id = "idle-lazy"};
    char err[SVC_ERRBUF_LEN] = "";
    uint64_t until;
    svc_err_t e;

    (void)state;
    declare(c, &t);
    rmq_consumer_opts_init(&ko);
    ko.conn = o;
    ko.topology = &t;
    assert_int_equal(rmq_consumer_new(&ko, &k, err), SVC_OK);
    until = svc_now_ms() + 6000;
    while (svc_now_ms() < until) {
        assert_int_equal(rmq_conn_keepalive(c, err), SVC_OK);
        assert_int_equal(rmq_consumer_next(k, 200, &d, err), SVC_ETIMEDOUT);
    }
    publish(c, &t, "idle-1", "after 6 s idle");
    d = next(k, 10000);
    if (rmq_consumer_retry(k, d, 1, 1, err) != SVC_OK)
        fail_msg("retry after idle: %s", err);
    rmq_delivery_free(d);
    d = next(k, 10000);
    assert_string_equal(rmq_delivery_message_id(d), "idle-1");
    assert_int_equal(rmq_consumer_ack(k, d, SVC_ERRBUF_SCRATCH), SVC_OK);
    rmq_delivery_free(d);
    e = rmq_publish(lazy, &t, &m, err);
    if (e == SVC_OK) /* the write may land in the socket before the close is read */
        e = rmq_publish(lazy, &t, &m, err);
    assert_int_equal(e, SVC_EUNAVAIL);
    assert_false(rmq_conn_alive(lazy));
    fprintf(stderr, "mq_it: the unserved connection: %s\n", err);
    rmq_consumer_free(k);
    rmq_conn_free(lazy);
    rmq_conn_free(c);
}

static void kill9_keeps_persistent_jobs(void **state)
{
    rmq_topology_t t = {.base = "it.kill9"};
    rmq_conn_t *c = conn_new();
    rmq_consumer_t *k;
    static bool seen[CRASH_JOBS];
    char id[32], q[RMQ_NAME_MAX], err[SVC_ERRBUF_LEN] = "";
    uint64_t t0;
    double kill_s = 0, start_s = 0;
    int got = 0;
    svc_err_t e;

    (void)state;
    declare(c, &t);
    t0 = svc_now_ms();
    for (int i = 0; i < CRASH_JOBS; i++) {
        snprintf(id, sizeof id, "kill9-%d", i);
        publish(c, &t, id, "persistent job");
    }
    fprintf(stderr, "mq_it: %d jobs published and confirmed in %llu ms\n", CRASH_JOBS,
            (unsigned long long)(svc_now_ms() - t0));
    assert_int_equal(mq_it_node(&node, "kill", &kill_s), SVC_OK);
    /* The connection is dead, and says so. */
    snprintf(id, sizeof id, "kill9-late");
    {
        rmq_message_t m = {.body = "x", .body_len = 1, .message_id = id};
        e = rmq_publish(c, &t, &m, err);
        if (e == SVC_OK) /* the write went into the socket buffer; the next one sees it */
            e = rmq_publish(c, &t, &m, err);
    }
    assert_int_not_equal(e, SVC_OK);
    assert_false(rmq_conn_alive(c));
    fprintf(stderr, "mq_it: after kill -9: %s %s\n", svc_err_name(e), err);
    rmq_conn_free(c);
    assert_int_equal(mq_it_node(&node, "start", &start_s), SVC_OK);
    assert_int_equal(mq_it_depth(&node, name_of(&t, RMQ_NAME_WORK, 0, q)), CRASH_JOBS);
    k = consumer_new(&t, 50);
    while (got < CRASH_JOBS) {
        rmq_delivery_t *d = next(k, 10000);
        int n = -1;
        assert_int_equal(sscanf(rmq_delivery_message_id(d), "kill9-%d", &n), 1);
        assert_true(n >= 0 && n < CRASH_JOBS && !seen[n]);
        seen[n] = true;
        got++;
        assert_int_equal(rmq_consumer_ack(k, d, SVC_ERRBUF_SCRATCH), SVC_OK);
        rmq_delivery_free(d);
    }
    rmq_consumer_free(k);
    fprintf(stderr, "mq_it: kill -9 took %.1f s, restart %.1f s; %d of %d jobs back, each once\n",
            kill_s, start_s, got, CRASH_JOBS);
    assert_int_equal(mq_it_depth(&node, q), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(connect_failures_are_named),
        cmocka_unit_test(topology_twice_is_a_noop),
        cmocka_unit_test(topology_other_arguments_is_named),
        cmocka_unit_test(publish_consume_ack),
        cmocka_unit_test(consumer_channel_error_is_reported),
        cmocka_unit_test(unroutable_is_an_error),
        cmocka_unit_test(retry_tier_then_dead_letter),
        cmocka_unit_test(unacked_is_redelivered),
        cmocka_unit_test(idle_connections_kept_alive),
        cmocka_unit_test(kill9_keeps_persistent_jobs),
    };
    return svc_test_run_group_tests_name("mq_broker", tests, group_up, group_down);
}
