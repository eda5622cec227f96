/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease.h - which shards of the outbox this relay reads. Each shard is read
 * by one relay at a time: its lease is a session-level advisory lock on the
 * relay's store connection, so a relay that dies (kill -9, a lost
 * connection) releases its shards at once and another takes them on its
 * next tick. Every relay of a database also holds a shared "member" lock,
 * so that each can count the others and keep only its fair share
 * (ceil(shards / relays)): a second relay starting takes half the shards
 * within two ticks, the first giving up the rest.
 *
 * A lease is an optimisation, not what keeps events in order: a relay that
 * lost one without knowing can only publish rows again, in order, and move
 * a cursor forward over rows it published itself (store.c, STMT_ADVANCE).
 *
 * Not thread-safe: the relay's thread only, with nothing in flight.
 */
#ifndef RLY_LEASE_H
#define RLY_LEASE_H

#include "store.h"

#define RLY_MAX_SHARDS 256

typedef struct rly_lease rly_lease_t;

/* st is borrowed (the relay's store connection; the locks live on it) and
 * must outlive the lease. *out owned by caller. */
svc_err_t rly_lease_new(rly_store_t *st, rly_lease_t **out);
void rly_lease_free(rly_lease_t *l); /* NULL-safe; the locks go with the session */

/* Learns what the session holds (a session re-made has lost everything),
 * joins, counts the relays and takes or gives up shards to hold its share,
 * trying free shards from a random start. *changed when the owned set did. */
svc_err_t rly_lease_tick(rly_lease_t *l, uint64_t random, bool *changed,
                         char errbuf[static SVC_ERRBUF_LEN]);

int rly_lease_owned(const rly_lease_t *l);        /* shards held          */
int rly_lease_shard(const rly_lease_t *l, int i); /* the i-th, ascending  */
int rly_lease_total(const rly_lease_t *l);        /* shards of the table  */
int rly_lease_relays(const rly_lease_t *l);       /* members at the tick  */

#endif
