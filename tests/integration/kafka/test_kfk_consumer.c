/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_kfk_consumer.c - pkg/kafka's consumer (kafka/consumer.h) on a real
 * broker (deploy/local/kafka.sh through relay_it, on free ports):
 *   - every record is handed once, a relay duplicate (same ce_id) is the
 *     handler's KFK_DUPLICATE, the offsets are committed: after close, a new
 *     member of the group gets nothing;
 *   - a poison record lands on the dead-letter topic with its key, value and
 *     headers and the dlq-* headers naming it, and the records behind it are
 *     handled;
 *   - a dead letter the broker does not acknowledge (its topic is missing)
 *     keeps the record: not committed, nothing behind it handed; once the
 *     topic exists, it is dead-lettered and the consumer goes on;
 *   - KFK_RETRY (the database is down) hands the same record again after a
 *     backoff, nothing behind it on its partition is handed meanwhile, and
 *     nothing is dead-lettered;
 *   - a second member joins (cooperative-sticky: it gets a share, the first
 *     keeps the rest); the first closes while it holds a record for a retry:
 *     the second gets that record and every other one, each handled once;
 *   - kill -9 of a consumer process after its handler's effect but before
 *     the offset commit: that one record is handed again to the next member
 *     (at least once), and no other record is;
 *   - batches in one transaction of the handler's (kfk_it_batch.c).
 * Topics are created by the test itself (the admin API), one set per case.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kfk_it.h"
#include "kfk_it_batch.h"

static uint64_t t_start;

/* ------------------------------------------------------------------------
 * Cases
 * ------------------------------------------------------------------------ */
static void every_record_once_then_committed(void **state)
{
    kit_fixture_t *f = *state;
    kit_ctx_t *t = calloc(1, sizeof *t);
    kfk_consumer_stats_t s;
    char page[16384], id[32];
    kfk_consumer_t *c;
    uint64_t t0;

    kit_produce(f, "kfk-it.once", "once", 30, NULL, -1);
    kit_produce(f, "kfk-it.once", "once", 8, "once-7", -1); /* once-7 again, as a relay would */
    t0 = svc_now_ms();
    c = kit_consumer(f, "kfk-it.once", "it-once", t);
    kit_drive(c, t, 38, 30000);
    fprintf(stderr,
            "[kfk] 38 records handled %llu ms after the consumer was made; first to "
            "last handler call %.1f ms (a synchronous commit after each)\n",
            (unsigned long long)(svc_now_ms() - t0), (double)(t->last_ns - t->first_ns) / 1e6);
    for (int i = 0; i < 30; i++) {
        snprintf(id, sizeof id, "once-%d", i);
        assert_int_equal(kit_count_verdict(t, id, KFK_HANDLED), 1);
        assert_int_equal(kit_count_verdict(t, id, KFK_DUPLICATE), i < 8 ? 1 : 0);
    }
    kfk_consumer_stats(c, &s);
    assert_int_equal(s.consumed, 38);
    assert_int_equal(s.handled, 30);
    assert_int_equal(s.duplicates, 8);
    assert_int_equal(s.dead_lettered + s.retries + s.commit_errors, 0);
    assert_int_equal(s.latency_count, 38);
    kit_drive_for(c, 400); /* a lag sample after the last commit */
    kfk_consumer_stats(c, &s);
    assert_int_equal(s.lag_total, 0);
    kfk_consumer_metrics(c, "it_consumer", page, sizeof page);
    assert_non_null(strstr(page, "it_consumer_consumed_total 38\n"));
    assert_non_null(strstr(page, "it_consumer_deduplicated_total 8\n"));
    assert_non_null(strstr(page, "it_consumer_handler_seconds_count 38\n"));
    assert_non_null(strstr(page, "it_consumer_assigned_partitions 3\n"));
    assert_non_null(strstr(page, "it_consumer_lag{topic=\"kfk-it.once\",partition=\"0\"} 0\n"));
    assert_non_null(strstr(page, "it_consumer_lag{topic=\"kfk-it.once\",partition=\"2\"} 0\n"));
    kit_close_free(c);
    kit_group_has_nothing_left(f, "kfk-it.once", "it-once", 3);
    free(t);
}

static void poison_goes_to_dlq_and_the_rest_is_handled(void **state)
{
    kit_fixture_t *f = *state;
    kit_ctx_t *t = calloc(1, sizeof *t);
    kfk_consumer_stats_t s;
    char want[16];
    kit_dead_t d;
    kfk_consumer_t *c;

    /* one key: one partition, so "behind it" is well defined */
    kit_produce(f, "kfk-it.poison", "p", 10, "order-1", 4);
    c = kit_consumer(f, "kfk-it.poison", "it-poison", t);
    kit_drive(c, t, 10, 30000);
    for (size_t i = 0; i < 10; i++) {
        char id[16];
        snprintf(id, sizeof id, "p-%zu", i);
        assert_string_equal(t->seen[i].id, id); /* in order, each once */
        assert_int_equal(t->seen[i].verdict, i == 4 ? KFK_POISON : KFK_HANDLED);
    }
    kfk_consumer_stats(c, &s);
    assert_int_equal(s.dead_lettered, 1);
    assert_int_equal(s.handled, 9);
    assert_int_equal(s.retries, 0);
    kit_close_free(c);

    kit_read_dead_letters(f, "kfk-it.poison.dlq", &d);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.key, "order-1");
    assert_string_equal(d.value, "poison");
    assert_string_equal(d.ce_id, "p-4");
    assert_string_equal(d.x_test, "kept");
    assert_string_equal(d.reason, "undecodable: test poison");
    assert_string_equal(d.topic, "kfk-it.poison");
    snprintf(want, sizeof want, "%d", (int)t->seen[4].partition);
    assert_string_equal(d.partition, want);
    snprintf(want, sizeof want, "%lld", (long long)t->seen[4].offset);
    assert_string_equal(d.offset, want);
    assert_string_equal(d.group, "it-poison");
    assert_int_equal(strlen(d.time), 24); /* 2026-12-03T10:40:12.345Z */
    fprintf(stderr, "[kfk] dead letter: %s [%s] offset %s, reason \"%s\", at %s\n", d.topic,
            d.partition, d.offset, d.reason, d.time);
    kit_group_has_nothing_left(f, "kfk-it.poison", "it-poison", 3);
    free(t);
}

static void unacknowledged_dead_letter_holds_the_record(void **state)
{
    kit_fixture_t *f = *state;
    kit_ctx_t *t = calloc(1, sizeof *t);
    char errbuf[SVC_ERRBUF_LEN] = "";
    kfk_consumer_stats_t s;
    svc_err_t err = SVC_OK;
    kit_dead_t d;
    kfk_consumer_t *c;
    uint64_t give_up;

    t->dlq_topic = "kfk-it.dlqdown.missing"; /* not created yet */
    t->dlq_timeout_ms = 1000;
    kit_produce(f, "kfk-it.dlqdown", "d", 3, NULL, 0); /* the first is poison */
    c = kit_consumer(f, "kfk-it.dlqdown", "it-dlqdown", t);
    give_up = svc_now_ms() + (uint64_t)it_ms(20000);
    while (err == SVC_OK && svc_now_ms() < give_up)
        err = kfk_consumer_poll(c, 100, NULL, errbuf);
    fprintf(stderr, "[kfk] dead letter to a missing topic: %s (%s)\n", svc_err_name(err), errbuf);
    assert_true(err != SVC_OK);
    kit_drive_for(c, 1500);
    kfk_consumer_stats(c, &s);
    /* kept: not dead-lettered, not committed, nothing behind it handed, and the
     * handler not asked again (only the copy is retried) */
    assert_int_equal(t->n, 1);
    assert_int_equal(t->seen[0].verdict, KFK_POISON);
    assert_int_equal(s.dead_lettered, 0);
    assert_true(s.retries >= 1);

    kit_create_topic(f, t->dlq_topic, 1);
    kit_drive(c, t, 3, 30000);
    kfk_consumer_stats(c, &s);
    assert_int_equal(s.dead_lettered, 1);
    assert_int_equal(s.handled, 2);
    assert_string_equal(t->seen[1].id, "d-1");
    assert_string_equal(t->seen[2].id, "d-2");
    fprintf(stderr, "[kfk] topic created: dead-lettered after %llu retries\n",
            (unsigned long long)s.retries);
    kit_close_free(c);
    kit_read_dead_letters(f, t->dlq_topic, &d);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.ce_id, "d-0");
    assert_string_equal(d.reason, "undecodable: test poison");
    free(t);
}

static void retry_holds_its_partition_then_succeeds(void **state)
{
    kit_fixture_t *f = *state;
    kit_ctx_t *t = calloc(1, sizeof *t);
    kfk_consumer_stats_t s;
    size_t first = KIT_MAX_SEEN, done = KIT_MAX_SEEN, behind = 0, others_meanwhile = 0;
    unsigned attempts = 0;
    kfk_consumer_t *c;
    const kit_seen_t *x;

    t->retry_fails = 3;
    kit_produce(f, "kfk-it.retry", "r", 20, NULL, -1);
    c = kit_consumer(f, "kfk-it.retry", "it-retry", t);
    kit_drive(c, t, 23, 30000);
    kfk_consumer_stats(c, &s);
    x = &t->seen[0];
    for (size_t i = 0; i < t->n; i++) {
        const kit_seen_t *y = &t->seen[i];
        if (strcmp(y->id, t->retry_id) == 0) {
            first = first == KIT_MAX_SEEN ? i : first;
            assert_int_equal(y->attempt, ++attempts); /* 1, 2, 3, 4 */
            if (y->verdict == KFK_HANDLED)
                done = i;
            continue;
        }
        assert_int_equal(y->attempt, 1);
        if (y->partition == x->partition) {
            behind++;
            /* nothing behind the held record is handed before it is done */
            if (done == KIT_MAX_SEEN)
                fail_msg("%s (offset %lld) was handed while %s (offset %lld) was held", y->id,
                         (long long)y->offset, x->id, (long long)x->offset);
        } else if (done == KIT_MAX_SEEN) {
            others_meanwhile++;
        }
    }
    assert_int_equal(first, 0);
    assert_true(done != KIT_MAX_SEEN);
    assert_int_equal(kit_count_verdict(t, t->retry_id, KFK_RETRY), 3);
    assert_int_equal(kit_count_verdict(t, t->retry_id, KFK_HANDLED), 1);
    assert_true(behind > 0);
    for (int i = 0; i < 20; i++) {
        char id[16];
        snprintf(id, sizeof id, "r-%d", i);
        assert_int_equal(kit_count_verdict(t, id, KFK_HANDLED), 1);
    }
    assert_int_equal(s.retries, 3);
    assert_int_equal(s.dead_lettered, 0);
    assert_int_equal(s.handled, 20);
    assert_int_equal(s.consumed, 20);
    fprintf(stderr,
            "[kfk] %s held for 3 retries; %zu records waited behind it, %zu of the other "
            "partition were handled meanwhile\n",
            x->id, behind, others_meanwhile);
    kit_close_free(c);
    free(t);
}

static void rebalance_moves_partitions_and_drops_retry_state(void **state)
{
    kit_fixture_t *f = *state;
    kit_ctx_t *ta = calloc(1, sizeof *ta), *tb = calloc(1, sizeof *tb);
    kfk_consumer_stats_t sa, sb;
    kfk_consumer_t *a, *b;
    char id[16];
    uint64_t give_up;

    ta->retry_fails = 1000000; /* A never gets its first record done */
    kit_produce(f, "kfk-it.rebalance", "b", 20, NULL, -1);
    a = kit_consumer(f, "kfk-it.rebalance", "it-rebalance", ta);
    kit_wait_assigned(a, 3);
    kit_drive(a, ta, 3, 10000); /* held, and retried: the backoff is 100-400 ms */
    b = kit_consumer(f, "kfk-it.rebalance", "it-rebalance", tb);
    /* cooperative-sticky: B gets a share, A keeps the rest */
    give_up = svc_now_ms() + (uint64_t)it_ms(20000);
    do {
        kit_drive_two(a, b, 200);
        kfk_consumer_stats(a, &sa);
        kfk_consumer_stats(b, &sb);
    } while ((sb.n_partitions == 0 || sa.n_partitions + sb.n_partitions != 3) &&
             svc_now_ms() < give_up);
    fprintf(stderr, "[kfk] rebalance: A has %u partitions, B %u\n", sa.n_partitions,
            sb.n_partitions);
    assert_true(sb.n_partitions >= 1 && sa.n_partitions >= 1);
    assert_int_equal(sa.n_partitions + sb.n_partitions, 3);
    kit_drive_two(a, b, 500);
    /* The held record is not done: B gets it, either in that rebalance (its
     * partition moved: A dropped it on revoke) or now, when A leaves. */
    kit_close_free(a);
    give_up = svc_now_ms() + (uint64_t)it_ms(20000);
    do {
        kit_drive_two(NULL, b, 200);
        kfk_consumer_stats(b, &sb);
    } while ((kit_handled_count(ta) + kit_handled_count(tb) < 20 || sb.n_partitions != 3) &&
             svc_now_ms() < give_up);
    kit_drive_two(NULL, b, 300);
    kfk_consumer_stats(b, &sb);
    assert_int_equal(sb.n_partitions, 3);
    for (int i = 0; i < 20; i++) {
        snprintf(id, sizeof id, "b-%d", i);
        /* exactly once across the two: every commit was synchronous */
        if (kit_count_verdict(ta, id, KFK_HANDLED) + kit_count_verdict(tb, id, KFK_HANDLED) != 1)
            fail_msg("%s handled %zu times by A, %zu by B", id,
                     kit_count_verdict(ta, id, KFK_HANDLED),
                     kit_count_verdict(tb, id, KFK_HANDLED));
    }
    assert_int_equal(kit_count_verdict(ta, ta->retry_id, KFK_HANDLED), 0);
    assert_int_equal(kit_count_verdict(tb, ta->retry_id, KFK_HANDLED), 1);
    assert_int_equal(sb.dead_lettered, 0);
    fprintf(stderr,
            "[kfk] A handled %zu and held %s for %zu attempts; B handled %llu, %s among "
            "them (attempt 1 there)\n",
            kit_handled_count(ta), ta->retry_id, kit_count_verdict(ta, ta->retry_id, KFK_RETRY),
            (unsigned long long)sb.handled, ta->retry_id);
    kit_close_free(b);
    free(ta);
    free(tb);
}

/* ------------------------------------------------------------------------
 * Crash: kill -9 between the handler's effect and the offset commit
 * ------------------------------------------------------------------------ */
static spawn_proc_t *start_helper(const kit_fixture_t *f, const char *out, const char *hang)
{
    char brokers[64], file[600], errbuf[SVC_ERRBUF_LEN] = "";
    const char *env[] = {brokers, "KFK_IT_TOPIC=kfk-it.crash", "KFK_IT_GROUP=it-crash", file, hang,
                         NULL};
    spawn_opts_t o;
    spawn_proc_t *p = NULL;

    snprintf(brokers, sizeof brokers, "KFK_IT_BROKERS=%s", f->kafka.brokers);
    snprintf(file, sizeof file, "KFK_IT_OUT=%s", out);
    spawn_opts_init(&o);
    o.path = getenv("KFK_IT_CONSUMER_BIN");
    assert_non_null(o.path);
    o.env = env;
    if (spawn_start(&o, &p, errbuf) != SVC_OK)
        fail_msg("start kfk_it_consumer: %s", errbuf);
    return p;
}

/* The ids in the file, one per line: how often id occurs; *lines gets the total. */
static int occurrences(const char *path, const char *id, int *lines)
{
    char line[128];
    FILE *fp = fopen(path, "r");
    int n = 0;

    *lines = 0;
    while (fp != NULL && fgets(line, sizeof line, fp) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        (*lines)++;
        n += id != NULL && strcmp(line, id) == 0;
    }
    if (fp != NULL)
        fclose(fp);
    return n;
}

static void kill9_after_effect_redelivers_that_record(void **state)
{
    kit_fixture_t *f = *state;
    char out[512], hung[64] = "", *log, *at;
    spawn_proc_t *a, *b;
    int lines = 0, ws = -1;
    uint64_t t0;

    snprintf(out, sizeof out, "%s/crash-ids.txt", getenv("RELAY_IT_RUN_DIR"));
    unlink(out);
    kit_produce(f, "kfk-it.crash", "c", 20, NULL, -1);
    a = start_helper(f, out, "KFK_IT_HANG_AT=8");
    if (spawn_log_wait(a, "hanging at ", it_ms(30000)) != SVC_OK) {
        spawn_log_dump(a, 40);
        fail_msg("the first consumer never reached its 8th record");
    }
    log = spawn_log_read(a);
    at = log != NULL ? strstr(log, "hanging at ") : NULL;
    assert_non_null(at);
    sscanf(at + strlen("hanging at "), "%63s", hung);
    free(log);
    assert_int_equal(occurrences(out, hung, &lines), 1);
    assert_int_equal(lines, 8);
    spawn_signal(a, SIGKILL);
    assert_int_equal(spawn_wait_exit(a, 5000, &ws), SVC_OK);
    assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
    spawn_free(a);

    t0 = svc_now_ms();
    b = start_helper(f, out, "KFK_IT_HANG_AT=0");
    for (uint64_t give_up = t0 + (uint64_t)it_ms(40000); svc_now_ms() < give_up;) {
        (void)occurrences(out, NULL, &lines);
        if (lines >= 21)
            break;
        usleep(50000);
    }
    fprintf(stderr, "[kfk] killed at %s; the next member had all 20 (%d lines) %llu ms later\n",
            hung, lines, (unsigned long long)(svc_now_ms() - t0));
    usleep(500000); /* any further (wrong) redelivery would show now */
    spawn_signal(b, SIGTERM);
    if (spawn_wait_exit(b, it_ms(20000), &ws) != SVC_OK || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        spawn_log_dump(b, 40);
        fail_msg("the second consumer did not exit 0 after SIGTERM");
    }
    spawn_free(b);
    for (int i = 0; i < 20; i++) {
        char id[16];
        snprintf(id, sizeof id, "c-%d", i);
        /* at least once; and only the record whose commit was lost, twice */
        assert_int_equal(occurrences(out, id, &lines), strcmp(id, hung) == 0 ? 2 : 1);
    }
    assert_int_equal(lines, 21);
}

static int group_setup(void **state)
{
    kit_fixture_t *f = calloc(1, sizeof *f);

    t_start = svc_now_ms();
    if (f == NULL || rly_it_kafka(&f->kafka, "start") != SVC_OK) {
        free(f);
        return -1;
    }
    fprintf(stderr, "[kfk] broker up on %s in %llu ms\n", f->kafka.brokers,
            (unsigned long long)(svc_now_ms() - t_start));
    kit_create_topics(f);
    *state = f;
    return 0;
}

static int group_teardown(void **state)
{
    kit_fixture_t *f = *state;

    if (f != NULL) {
        rly_it_kafka_cleanup(&f->kafka);
        free(f);
    }
    fprintf(stderr, "[kfk] all done in %llu ms\n", (unsigned long long)(svc_now_ms() - t_start));
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_record_once_then_committed),
        cmocka_unit_test(poison_goes_to_dlq_and_the_rest_is_handled),
        cmocka_unit_test(unacknowledged_dead_letter_holds_the_record),
        cmocka_unit_test(retry_holds_its_partition_then_succeeds),
        cmocka_unit_test(rebalance_moves_partitions_and_drops_retry_state),
        cmocka_unit_test(kill9_after_effect_redelivers_that_record),
        cmocka_unit_test(kit_batch_many_to_a_transaction),
        cmocka_unit_test(kit_batch_retry_rolls_back_and_splits),
        cmocka_unit_test(kit_batch_poison_is_dead_lettered),
        cmocka_unit_test(kit_batch_failed_commit_hands_it_again),
        cmocka_unit_test(kit_batch_interval_commits_in_the_background),
    };
    return svc_test_run_group_tests_name("kfk_consumer_it", tests, group_setup, group_teardown);
}
