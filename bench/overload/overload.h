/* SPDX-License-Identifier: Apache-2.0 */
/*
 * overload.h - the open-loop overload experiment of docs/overload.md (issue 15).
 *
 * Originals arrive at a constant rate (one every 1/rate s, each on a thread
 * of its own, never waiting for earlier answers) and call GetProduct on the
 * catalog through one of two clients with the same per-request deadline:
 *
 *   naive    up to naive_attempts attempts on any error, a fixed backoff, no
 *            budget, no concurrency limit, no breaker (pkg/rpc directly);
 *   guarded  pkg/resilience's gRPC binding with its shipped defaults (full
 *            jitter, retry budget, breaker, pushback) and a bulkhead.
 *
 * Phases change the catalog's fault knobs (its admin port, /debug/fault)
 * once per second, which also re-applies them after a catalog restart.
 * Everything is counted per second of ARRIVAL: an original and all the
 * attempts made for it land in the row of the second it was sent.
 */
#ifndef OV_OVERLOAD_H
#define OV_OVERLOAD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "svc/core.h"

#define OV_MAX_PHASES               8
#define OV_DEFAULT_RATE             50
#define OV_DEFAULT_DEADLINE_MS      300
#define OV_DEFAULT_NAIVE_ATTEMPTS   3
#define OV_DEFAULT_NAIVE_BACKOFF_MS 10
#define OV_DEFAULT_BULKHEAD         4
#define OV_DEFAULT_SLOTS            4
#define OV_DEFAULT_PUSHBACK_MS      100

typedef enum { OV_NAIVE, OV_GUARDED } ov_mode_t;

typedef struct ov_phase {
    char name[16]; /* "normal", "slow", ... (a CSV column) */
    int seconds;
    uint32_t latency_ms; /* the catalog's added latency in this phase */
} ov_phase_t;

typedef struct ov_opts {
    const char *target;     /* catalog gRPC host:port */
    const char *admin;      /* catalog admin host:port (knobs); required */
    const char *product_id; /* an existing product */
    ov_mode_t mode;
    int rate;        /* originals per second */
    int deadline_ms; /* per original, all attempts included */
    ov_phase_t phases[OV_MAX_PHASES];
    int n_phases;
    uint32_t slots, pushback_ms; /* catalog knobs in every phase */
    uint32_t queue;              /* catalog knob: calls that wait for a slot (0: none) */
    int naive_attempts, naive_backoff_ms;
    uint32_t bulkhead; /* guarded: max_concurrent */
} ov_opts_t;

void ov_opts_init(ov_opts_t *o);

/* One second of arrivals. */
typedef struct ov_row {
    int phase;
    unsigned originals, attempts, ok;
    unsigned f_deadline, f_exhausted, f_unavailable, f_breaker, f_bulkhead, f_budget, f_other;
    double ok_p50_ms, ok_p99_ms;    /* successes */
    double fail_p50_ms;             /* failures (fast rejections included) */
    int64_t outstanding_max;        /* the generator's originals in progress, max */
    int64_t attempts_in_flight_max; /* the generator's attempts on the wire, max (sampled 10/s) */
    int64_t dep_in_flight;          /* the catalog's own gauge at the second's end; -1 down */
    int64_t dep_rejected;           /* the catalog's slot rejections in this second */
    int breaker;                    /* guarded: 0 closed, 1 open, 2 half-open; -1 naive */
} ov_row_t;

/* Runs the experiment; *rows (owned by caller, free()) has one row per
 * second of all phases. SVC_EINVAL/SVC_ENOMEM/SVC_EUNAVAIL with errbuf. */
svc_err_t ov_run(const ov_opts_t *o, ov_row_t **rows, int *n_rows,
                 char errbuf[static SVC_ERRBUF_LEN]);

/* The CSV of a run: a header line, one line per row. */
void ov_write_csv(FILE *f, const ov_opts_t *o, const ov_row_t *rows, int n);

/* Attempts per original over rows [from, to). 0 without originals. */
double ov_amplification(const ov_row_t *rows, int from, int to);

/* POSTs form (e.g. "latency_ms=20&slots=4") to http://admin/debug/fault;
 * true on 200, with the catalog's in_flight and rejected counters. */
bool ov_knobs_set(const char *admin, const char *form, int64_t *in_flight, int64_t *rejected);

#endif
