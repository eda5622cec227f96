/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stats.h - the process's database counters behind db_metrics_render: one
 * row per statement name (interned when a connection is created; beyond
 * DB__STATS_MAX names they share the row "other"), connects, open
 * connections. Relaxed atomic adds: a database round trip costs far more
 * than a shared counter does.
 */
#ifndef DB_STATS_H
#define DB_STATS_H

#include "db/db.h"

#define DB__STATS_MAX 64

/* The row of statement `name` (stable for the process's life). */
size_t db__stats_intern(const char *name);
/* One call of the statement of `row`; unknown: it failed without the
 * server's verdict (db_outcome_unknown). */
void db__stats_query(size_t row, svc_err_t outcome, bool unknown, uint64_t ns);
void db__stats_connect(bool ok);
void db__stats_open(int delta);

#endif
