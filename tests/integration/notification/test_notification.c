/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The notification service against real Kafka, RabbitMQ and the notify-sink
 * (docs/notifications.md): one signed delivery per confirmed order, retries
 * inside a job, Retry-After, the retry tiers through an outage, the
 * dead-letter queue, and kill -9 of the service and of RabbitMQ.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "ntf_it.h"
#include "support/group.h"

static ntf_it_t world;

static int group_up(void **state)
{
    (void)state;
    return ntf_it_up(&world);
}

static int group_down(void **state)
{
    (void)state;
    return ntf_it_down(&world);
}

static int reset_sink(void **state)
{
    (void)state;
    ntf_it_control(&world, "reset=1");
    return 0;
}

/* At least once, and deduped: one record at the sink, whatever was repeated
 * (a Kafka offset not committed before the kill, an ack lost with a
 * connection). */
static void assert_effect_once(const char *id)
{
    int times = 0;

    assert_int_equal(ntf_it_recorded(&world, id, &times), 1);
    assert_true(times >= 1);
    print_message("%s: recorded once, delivered %d time(s)\n", id, times);
}

static uint64_t ms_since(uint64_t t0)
{
    return (svc_now_ns() - t0) / 1000000u;
}

/* An order confirmed and one cancelled: one signed delivery each (the sink
 * checks the signature and refuses a bad one); an OrderCreated: none. */
static void confirmed_and_cancelled_are_delivered_once(void **state)
{
    char line[160];

    (void)state;
    ntf_it_produce(&world, "created", "evt-created-1");
    ntf_it_produce(&world, "confirmed", "evt-happy-1");
    ntf_it_produce(&world, "cancelled", "evt-happy-2");
    assert_true(ntf_it_wait_received(&world, "evt-happy-1", 15000));
    assert_true(ntf_it_wait_received(&world, "evt-happy-2", 15000));
    snprintf(line, sizeof line,
             "job delivered id=evt-happy-1 type=shopmicro.order.v1.OrderConfirmed "
             "status=200 attempts=1");
    ntf_it_wait_log(&world, line, 5000);
    assert_int_equal(ntf_it_received(&world, "evt-happy-1"), 1);
    assert_int_equal(ntf_it_received(&world, "evt-created-1"), 0);
    assert_true(spawn_log_contains(world.sink, "delivery evt-happy-1 accepted"));
    /* Another partition (another key): it may come after the others. */
    ntf_it_wait_metric(&world, "shopmicro_notification_events_skipped_total", 1, 10000);
    assert_int_equal(ntf_it_received(&world, "evt-created-1"), 0);
    assert_true(ntf_it_metric(&world, "shopmicro_notification_jobs_delivered_total") >= 2);
}

/* Three 500s, then the fourth attempt of the same pass gets through. */
static void three_failures_then_delivered_in_one_pass(void **state)
{
    (void)state;
    ntf_it_control(&world, "fail=3");
    ntf_it_produce(&world, "confirmed", "evt-fail3");
    assert_true(ntf_it_wait_received(&world, "evt-fail3", 15000));
    ntf_it_wait_log(&world,
                    "job delivered id=evt-fail3 type=shopmicro.order.v1.OrderConfirmed "
                    "status=200 attempts=4",
                    5000);
    assert_false(spawn_log_contains(world.svc, "job to retry tier id=evt-fail3"));
}

/* 429 with Retry-After: 2 - the next attempt waits at least 2 s. */
static void retry_after_is_honoured(void **state)
{
    uint64_t t0 = svc_now_ns(), took;

    (void)state;
    ntf_it_control(&world, "throttle=1&retry_after=2");
    ntf_it_produce(&world, "confirmed", "evt-429");
    assert_true(ntf_it_wait_received(&world, "evt-429", 15000));
    took = ms_since(t0);
    print_message("429 Retry-After: 2 -> delivered after %llu ms\n", (unsigned long long)took);
    assert_true(took >= 2000);
    ntf_it_wait_log(&world,
                    "job delivered id=evt-429 type=shopmicro.order.v1.OrderConfirmed "
                    "status=200 attempts=2",
                    5000);
}

/* The sink away for 4 s: every pass fails, the breaker opens, the jobs go
 * through the tiers (1 s, 2 s, ...) and all arrive once it is back. The
 * tiers add up to 7 s before a job is dead-lettered, so the outage must end
 * well before (a 6 s one left a second, and a loaded CI machine once
 * dead-lettered a job in it). */
static void an_outage_moves_jobs_through_the_tiers(void **state)
{
    static const char *const ids[] = {"evt-away-1", "evt-away-2", "evt-away-3"};
    uint64_t t0 = svc_now_ns();

    (void)state;
    ntf_it_control(&world, "away=4");
    for (size_t i = 0; i < 3; i++)
        ntf_it_produce(&world, "confirmed", ids[i]);
    ntf_it_wait_log(&world, "job to retry tier id=evt-away-1 tier=1", 10000);
    for (size_t i = 0; i < 3; i++)
        assert_true(ntf_it_wait_received(&world, ids[i], 30000));
    print_message("outage of 4 s: all 3 delivered after %llu ms\n",
                  (unsigned long long)ms_since(t0));
    assert_true(ms_since(t0) >= 4000);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(ntf_it_received(&world, ids[i]), 1);
    assert_false(spawn_log_contains(world.svc, "job dead-lettered id=evt-away"));
}

/* Always 500: after the last tier the job is in the dead-letter queue, with
 * its reason, last status and the attempts of every pass; the operator's
 * CLI shows it, and its replay delivers it once the sink is well again. */
static void always_failing_ends_in_the_dead_letter_queue(void **state)
{
    static char out[16384];

    (void)state;
    ntf_it_control(&world, "fail=1000");
    ntf_it_produce(&world, "cancelled", "evt-dead");
    ntf_it_wait_log(&world,
                    "job dead-lettered id=evt-dead reason=attempts-exhausted status=500 "
                    "attempts=16",
                    40000);
    assert_int_equal(mq_it_depth(&world.rabbit, NTF_IT_BASE ".dead"), 1);
    assert_int_equal(ntf_it_dlq(&world, "show", "evt-dead", out, sizeof out), 0);
    assert_non_null(strstr(out, RMQ_HDR_FINAL_REASON ": attempts-exhausted"));
    assert_non_null(strstr(out, RMQ_HDR_HTTP_STATUS ": 500"));
    assert_non_null(strstr(out, RMQ_HDR_ATTEMPTS ": 16"));
    assert_non_null(
        strstr(out, "shopmicro.order.v1.OrderCancelled")); /* the body, pretty-printed */
    assert_int_equal(ntf_it_received(&world, "evt-dead"), 0);
    ntf_it_control(&world, "reset=1");
    assert_int_equal(ntf_it_dlq(&world, "replay", "evt-dead", out, sizeof out), 0);
    assert_true(ntf_it_wait_received(&world, "evt-dead", 15000));
    assert_effect_once("evt-dead");
    assert_int_equal(mq_it_depth(&world.rabbit, NTF_IT_BASE ".dead"), 0);
}

/* kill -9 of the service while the sink holds a delivery unanswered: the
 * job was never acked, so the next service gets it again; the sink records
 * its effect once. */
static void kill9_mid_delivery_redelivers(void **state)
{
    (void)state;
    ntf_it_control(&world, "hang=1");
    ntf_it_produce(&world, "confirmed", "evt-kill9");
    assert_int_equal(spawn_log_wait(world.sink, "evt-kill9", mq_it_ms(15000)), SVC_OK);
    spawn_free(world.svc); /* SIGKILL */
    world.svc = NULL;
    ntf_it_control(&world, "reset=1");
    ntf_it_svc_start(&world);
    assert_true(ntf_it_wait_received(&world, "evt-kill9", 20000));
    assert_effect_once("evt-kill9");
}

/* kill -9 of RabbitMQ with jobs queued (the sink failing every delivery,
 * each job waiting in a retry tier's queue): after the node restarts none
 * is lost, and each arrives once the sink takes them. */
static void kill9_of_rabbitmq_loses_no_job(void **state)
{
    char id[8][32];
    uint64_t end;

    (void)state;
    ntf_it_control(&world, "fail=100000");
    for (int i = 0; i < 8; i++) {
        snprintf(id[i], sizeof id[i], "evt-rmq-%d", i);
        ntf_it_produce(&world, "confirmed", id[i]);
    }
    /* The first may wait for the group: the member killed before had its partitions. */
    ntf_it_wait_log(&world, "job to retry tier id=evt-rmq-", 30000);
    end = svc_now_ns() + (uint64_t)mq_it_ms(30000) * 1000000u;
    while (spawn_log_count(world.svc, "job to retry tier id=evt-rmq-") < 8 && svc_now_ns() < end) {
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
    assert_true(spawn_log_count(world.svc, "job to retry tier id=evt-rmq-") >= 8);
    assert_int_equal(mq_it_node(&world.rabbit, "kill", NULL), SVC_OK);
    assert_int_equal(mq_it_node(&world.rabbit, "start", NULL), SVC_OK);
    ntf_it_control(&world, "reset=1");
    for (int i = 0; i < 8; i++)
        assert_true(ntf_it_wait_received(&world, id[i], 60000));
    for (int i = 0; i < 8; i++)
        assert_effect_once(id[i]);
    ntf_it_wait_log(&world, "consuming worker=0", 1000); /* the workers came back */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(confirmed_and_cancelled_are_delivered_once, reset_sink),
        cmocka_unit_test_setup(three_failures_then_delivered_in_one_pass, reset_sink),
        cmocka_unit_test_setup(retry_after_is_honoured, reset_sink),
        cmocka_unit_test_setup(an_outage_moves_jobs_through_the_tiers, reset_sink),
        cmocka_unit_test_setup(always_failing_ends_in_the_dead_letter_queue, reset_sink),
        cmocka_unit_test_setup(kill9_mid_delivery_redelivers, reset_sink),
        cmocka_unit_test_setup(kill9_of_rabbitmq_loses_no_job, reset_sink),
    };
    return svc_test_run_group_tests_name("notification", tests, group_up, group_down);
}
