/* SPDX-License-Identifier: Apache-2.0 */
/* lease.c - shard leases from advisory locks (see lease.h). */
#include <stdlib.h>
#include <string.h>

#include "lease.h"

#define MOD "relay.lease"

struct rly_lease {
    rly_store_t *st;
    int total;                 /* shards in outbox_cursor; 0 until known */
    int shard[RLY_MAX_SHARDS]; /* every shard, ascending                 */
    bool held[RLY_MAX_SHARDS]; /* by index into shard[]                  */
    int owned, relays;
    bool member;
};

svc_err_t rly_lease_new(rly_store_t *st, rly_lease_t **out)
{
    rly_lease_t *l = calloc(1, sizeof *l);

    *out = l;
    if (l == NULL)
        return SVC_ENOMEM;
    l->st = st;
    return SVC_OK;
}

void rly_lease_free(rly_lease_t *l)
{
    free(l);
}

static int index_of(const rly_lease_t *l, int shard)
{
    for (int i = 0; i < l->total; i++)
        if (l->shard[i] == shard)
            return i;
    return -1;
}

static svc_err_t load_shards(rly_lease_t *l, char errbuf[static SVC_ERRBUF_LEN])
{
    PGresult *r;
    svc_err_t err = rly_store_shards(l->st, &r, errbuf);
    int n = err == SVC_OK ? PQntuples(r) : 0;

    if (err == SVC_OK && (n == 0 || n > RLY_MAX_SHARDS)) {
        svc_errbuf_set(errbuf, "outbox_cursor has %d shards (1..%d expected)", n, RLY_MAX_SHARDS);
        err = SVC_EINTERNAL;
    }
    for (int i = 0; err == SVC_OK && i < n; i++)
        l->shard[i] = atoi(PQgetvalue(r, i, 0));
    if (err == SVC_OK)
        l->total = n;
    PQclear(r);
    return err;
}

/* What the session really holds: after a reconnect, nothing. */
static svc_err_t learn_held(rly_lease_t *l, char errbuf[static SVC_ERRBUF_LEN])
{
    PGresult *r;
    svc_err_t err = rly_store_locks_held(l->st, &r, errbuf);

    if (err != SVC_OK)
        return err;
    memset(l->held, 0, sizeof l->held);
    l->member = false;
    l->owned = 0;
    for (int i = 0; i < PQntuples(r); i++) {
        int k = index_of(l, atoi(PQgetvalue(r, i, 1)));
        if (PQgetvalue(r, i, 0)[0] == 'm')
            l->member = true;
        else if (k >= 0 && !l->held[k]) {
            l->held[k] = true;
            l->owned++;
        }
    }
    PQclear(r);
    return SVC_OK;
}

/* Takes free shards, from a random start so that relays starting together
 * do not all try the same ones first, until `share` are held. */
static svc_err_t take(rly_lease_t *l, int share, uint64_t random,
                      char errbuf[static SVC_ERRBUF_LEN])
{
    int start = (int)(random % (uint64_t)l->total);
    svc_err_t err = SVC_OK;

    for (int j = 0; j < l->total && l->owned < share && err == SVC_OK; j++) {
        int k = (start + j) % l->total;
        bool got = false;
        if (l->held[k])
            continue;
        err = rly_store_lock_shard(l->st, l->shard[k], &got, errbuf);
        if (got) {
            l->held[k] = true;
            l->owned++;
        }
    }
    return err;
}

/* Gives up shards beyond `share`, the highest first. */
static svc_err_t give_up(rly_lease_t *l, int share, char errbuf[static SVC_ERRBUF_LEN])
{
    svc_err_t err = SVC_OK;

    for (int k = l->total - 1; k >= 0 && l->owned > share && err == SVC_OK; k--) {
        if (!l->held[k])
            continue;
        err = rly_store_unlock_shard(l->st, l->shard[k], errbuf);
        if (err == SVC_OK) {
            l->held[k] = false;
            l->owned--;
        }
    }
    return err;
}

static void log_owned(const rly_lease_t *l)
{
    char list[RLY_MAX_SHARDS * 5 + 1] = "";
    size_t len = 0;

    for (int k = 0; k < l->total && len + 6 < sizeof list; k++)
        if (l->held[k])
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", len ? "," : "",
                                    l->shard[k]);
    svc_log_info(MOD, "leases: %d of %d shards (%s), %d relays of this database", l->owned,
                 l->total, len ? list : "none", l->relays);
}

svc_err_t rly_lease_tick(rly_lease_t *l, uint64_t random, bool *changed,
                         char errbuf[static SVC_ERRBUF_LEN])
{
    bool before[RLY_MAX_SHARDS], joined = false;
    svc_err_t err = l->total == 0 ? load_shards(l, errbuf) : SVC_OK;
    int share;

    *changed = false;
    memcpy(before, l->held, sizeof before);
    if (err == SVC_OK)
        err = learn_held(l, errbuf);
    if (err == SVC_OK && !l->member)
        err = rly_store_join(l->st, &joined, errbuf);
    l->member = l->member || joined;
    if (err == SVC_OK)
        err = rly_store_members(l->st, &l->relays, errbuf);
    if (err != SVC_OK)
        return err;
    share = l->relays > 0 ? (l->total + l->relays - 1) / l->relays : l->total;
    err = l->owned < share ? take(l, share, random, errbuf) : give_up(l, share, errbuf);
    *changed = memcmp(before, l->held, sizeof before) != 0;
    if (*changed)
        log_owned(l);
    return err;
}

int rly_lease_owned(const rly_lease_t *l)
{
    return l->owned;
}

int rly_lease_shard(const rly_lease_t *l, int i)
{
    for (int k = 0; k < l->total; k++)
        if (l->held[k] && i-- == 0)
            return l->shard[k];
    return -1;
}

int rly_lease_total(const rly_lease_t *l)
{
    return l->total;
}

int rly_lease_relays(const rly_lease_t *l)
{
    return l->relays;
}
