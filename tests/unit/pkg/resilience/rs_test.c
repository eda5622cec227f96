/* SPDX-License-Identifier: Apache-2.0 */
/* rs_test.c - the shared fakes of rs_test.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rs_test.h"

static const rs_method_t catalog_methods[] = {
    {.path = GET_PRODUCT, .idempotency = RS_IDEMPOTENT},
    {.path = LIST_PRODUCTS, .idempotency = RS_IDEMPOTENT},
    {.path = CREATE_PRODUCT, .idempotency = RS_NOT_IDEMPOTENT},
    {.path = CREATE_ORDER, .idempotency = RS_NOT_IDEMPOTENT},
};

static uint64_t fake_random(void *ctx)
{
    return ((rt_t *)ctx)->random_value;
}

static void fake_sleep(void *ctx, uint64_t ns)
{
    rt_t *t = ctx;

    fake_clock_advance_ns(&t->clock, ns);
    t->slept_ns += ns;
    if (t->sleeps < RT_MAX_RECORDS)
        t->sleep_end_ns[t->sleeps] = atomic_load(&t->clock.now_ns);
    t->sleeps++;
}

static void record_transition(void *ctx, const rs_transition_t *tr)
{
    rt_t *t = ctx;

    if (t->n_transitions < RT_MAX_RECORDS)
        snprintf(t->transitions[t->n_transitions], sizeof t->transitions[0], "%s", tr->text);
    t->n_transitions++;
}

void rt_init(rt_t *t)
{
    memset(t, 0, sizeof *t);
    fake_clock_init(&t->clock, RT_START_NS);
    t->random_value = UINT64_MAX; /* full jitter draws the top of the window */
    rs_upstream_opts_init(&t->opts);
    t->opts.name = "catalog";
    t->opts.methods = catalog_methods;
    t->opts.n_methods = SVC_COUNTOF(catalog_methods);
    t->opts.clock = fake_clock_iface(&t->clock);
    t->opts.random = (rs_random_t){fake_random, t};
    t->opts.sleep = fake_sleep;
    t->opts.sleep_ctx = t;
    t->opts.on_transition = record_transition;
    t->opts.on_transition_ctx = t;
}

void rt_start(rt_t *t)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    svc_err_t err = rs_upstream_new(&t->opts, &t->up, errbuf);

    if (err != SVC_OK)
        fail_msg("rs_upstream_new: %s (%s)", svc_strerror(err), errbuf);
}

void rt_stop(rt_t *t)
{
    rs_upstream_free(t->up);
    t->up = NULL;
}

int rt_setup(void **state)
{
    rt_t *t = calloc(1, sizeof *t);

    if (t == NULL)
        return -1;
    rt_init(t);
    *state = t;
    return 0;
}

int rt_teardown(void **state)
{
    rt_t *t = *state;

    rt_stop(t);
    free(t);
    return 0;
}

rs_outcome_t rt_outcome(svc_err_t err)
{
    rs_outcome_t o = RS_OUTCOME_INIT;

    o.err = err;
    return o;
}

void rt_script_init(rt_script_t *s, rt_t *t, svc_err_t err, size_t n)
{
    memset(s, 0, sizeof *s);
    s->clock = &t->clock;
    s->latency_ns = MS(1);
    s->n = n;
    for (size_t i = 0; i < n && i < RT_MAX_RECORDS; i++)
        s->outcomes[i] = rt_outcome(err);
}

void rt_op(void *arg, const rs_attempt_t *at, rs_outcome_t *out)
{
    rt_script_t *s = arg;
    size_t i = s->calls < s->n ? s->calls : s->n - 1;
    uint64_t now = atomic_load(&s->clock->now_ns);

    if (s->calls < RT_MAX_RECORDS) {
        s->start_ns[s->calls] = now;
        s->deadline_ns[s->calls] = at->deadline_ns;
        s->number[s->calls] = at->number;
    }
    s->calls++;
    *out = s->outcomes[i];
    /* A timer that fires means the attempt lasted until its deadline. */
    if (out->attempt_timer_fired && at->deadline_ns != SVC_DEADLINE_NONE)
        fake_clock_advance_ns(s->clock, at->deadline_ns - now);
    else
        fake_clock_advance_ns(s->clock, s->latency_ns);
}

svc_err_t rt_run(rt_t *t, const char *method, uint64_t deadline_ns, rt_script_t *s,
                 rs_result_t *res)
{
    return rs_call_run(t->up, method, deadline_ns, rt_op, s, res);
}

void rt_call(rt_t *t, const char *method, svc_err_t err, rs_result_t *res)
{
    rt_script_t s;

    rt_script_init(&s, t, err, 1);
    (void)rt_run(t, method, SVC_DEADLINE_NONE, &s, res);
}

uint64_t rt_random_for(uint32_t want, uint32_t w)
{
    uint64_t hi = (((uint64_t)want << 32) + w) / ((uint64_t)w + 1);

    return hi << 32;
}

const char *rt_metrics(rt_t *t)
{
    static char buf[1 << 17];
    size_t len;

    assert_int_equal(rs_metrics_render(&t->up, 1, buf, sizeof buf, &len), SVC_OK);
    return buf;
}
