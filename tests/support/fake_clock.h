/* SPDX-License-Identifier: Apache-2.0 */
/* fake_clock.h - a clock that only moves when a test says so. Thread-safe. */
#ifndef SUPPORT_FAKE_CLOCK_H
#define SUPPORT_FAKE_CLOCK_H

#include <stdatomic.h>
#include <stdint.h>

#include "svc/core.h"

typedef struct fake_clock {
    _Atomic uint64_t now_ns;
    svc_clock_t iface;
} fake_clock_t;

/* Starts at start_ns (use a large value so "now - x" never underflows). */
void fake_clock_init(fake_clock_t *c, uint64_t start_ns);
const svc_clock_t *fake_clock_iface(fake_clock_t *c);
void fake_clock_advance_ms(fake_clock_t *c, uint64_t ms);
void fake_clock_advance_ns(fake_clock_t *c, uint64_t ns);

#endif
