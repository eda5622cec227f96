/* SPDX-License-Identifier: Apache-2.0 */
#include "support/fake_clock.h"

static uint64_t fake_now(void *ctx)
{
    return atomic_load(&((fake_clock_t *)ctx)->now_ns);
}

void fake_clock_init(fake_clock_t *c, uint64_t start_ns)
{
    atomic_store(&c->now_ns, start_ns);
    c->iface.now_ns = fake_now;
    c->iface.ctx = c;
}

const svc_clock_t *fake_clock_iface(fake_clock_t *c)
{
    return &c->iface;
}

void fake_clock_advance_ms(fake_clock_t *c, uint64_t ms)
{
    atomic_fetch_add(&c->now_ns, ms * SVC_NS_PER_MS);
}

void fake_clock_advance_ns(fake_clock_t *c, uint64_t ns)
{
    atomic_fetch_add(&c->now_ns, ns);
}
