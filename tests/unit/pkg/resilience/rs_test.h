/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rs_test.h - the fakes the resilience tests share: a clock that moves only
 * when told, a random source that returns what the test chose, a sleep that
 * advances the fake clock, a scripted transport, and a recorder for breaker
 * transitions and log lines. Nothing here sleeps for real.
 */
#ifndef RS_TEST_H
#define RS_TEST_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <setjmp.h>
#include <cmocka.h>

#include "rs/resilience.h"
#include "support/fake_clock.h"

#define GET_PRODUCT       "/shopmicro.catalog.v1.CatalogService/GetProduct"
#define LIST_PRODUCTS     "/shopmicro.catalog.v1.CatalogService/ListProducts"
#define CREATE_PRODUCT    "/shopmicro.catalog.v1.CatalogService/CreateProduct"
#define CREATE_ORDER      "/shopmicro.order.v1.OrderService/CreateOrder"
#define UNDECLARED_GET    "/shopmicro.catalog.v1.CatalogService/GetWidget"
#define UNDECLARED_CREATE "/shopmicro.catalog.v1.CatalogService/CreateWidget"

#define MS(x)          ((uint64_t)(x)*SVC_NS_PER_MS)
#define RT_START_NS    (1000ull * 1000 * SVC_NS_PER_MS) /* 1000 s: "now - x" never wraps */
#define RT_MAX_RECORDS 64

/* A transport that answers from a script; the last entry repeats. */
typedef struct rt_script {
    rs_outcome_t outcomes[RT_MAX_RECORDS];
    size_t n;
    uint64_t latency_ns; /* clock advance per attempt (unless its timer fires) */
    /* what the engine gave each attempt */
    size_t calls;
    uint64_t start_ns[RT_MAX_RECORDS], deadline_ns[RT_MAX_RECORDS];
    uint32_t number[RT_MAX_RECORDS];
    fake_clock_t *clock;
} rt_script_t;

typedef struct rt {
    fake_clock_t clock;
    uint64_t random_value; /* what the fake random source returns */
    uint64_t slept_ns;
    unsigned sleeps;
    uint64_t sleep_end_ns[RT_MAX_RECORDS];
    char transitions[RT_MAX_RECORDS][192];
    unsigned n_transitions;
    rs_upstream_opts_t opts; /* tweak between rt_init() and rt_start() */
    rs_upstream_t *up;
} rt_t;

/* The catalog upstream of the course: three declared methods plus
 * CreateOrder, fake clock/random/sleep, transitions recorded. */
void rt_init(rt_t *t);
void rt_start(rt_t *t);
void rt_stop(rt_t *t);
/* cmocka fixtures: *state becomes a fresh rt_t (not started). */
int rt_setup(void **state);
int rt_teardown(void **state);

/* Fills a script: n outcomes of `err` (more can be set by hand). */
void rt_script_init(rt_script_t *s, rt_t *t, svc_err_t err, size_t n);
rs_outcome_t rt_outcome(svc_err_t err);
/* rs_op_fn over an rt_script_t. */
void rt_op(void *arg, const rs_attempt_t *at, rs_outcome_t *out);

/* rs_call_run with the script as transport. */
svc_err_t rt_run(rt_t *t, const char *method, uint64_t deadline_ns, rt_script_t *s,
                 rs_result_t *res);
/* One call that fails with err on every attempt (for driving the breaker). */
void rt_call(rt_t *t, const char *method, svc_err_t err, rs_result_t *res);

/* A random value that makes full jitter over [0, w] draw exactly `want`. */
uint64_t rt_random_for(uint32_t want, uint32_t w);

/* Renders t's metrics into a static buffer. */
const char *rt_metrics(rt_t *t);

#endif
