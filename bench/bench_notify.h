/* SPDX-License-Identifier: Apache-2.0 */
/* bench_notify.h - what the two files of bench_notify share. */
#ifndef BENCH_NOTIFY_H
#define BENCH_NOTIFY_H

/* Prints "bench_notify: <message>" on stderr and exits 1. */
void bn_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* The `sinklog` and `e2e` modes (bench_notify_e2e.c); exit codes as main's. */
int bn_cmd_sinklog(const char *path);
int bn_cmd_e2e(const char *orders_path, const char *outbox_path, const char *log_path);

#endif
