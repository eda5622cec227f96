/* SPDX-License-Identifier: Apache-2.0 */
/*
 * errfilter.h - h2o's own error answers in the gateway's words: the answers
 * h2o writes before any handler runs (413 body too large, 400 broken
 * chunked encoding or Content-Length, 400 unknown Transfer-Encoding, 417
 * unknown Expect) get the same JSON error body (status.h) as every other
 * error, and are counted and logged like them. Loop thread only.
 */
#ifndef GW_ERRFILTER_H
#define GW_ERRFILTER_H

#include <h2o.h>

#include "dispatch.h"

/* Adds the filter to pc (the host's fallback path, which those answers go
 * through). app is borrowed. */
void gw_errfilter_register(h2o_pathconf_t *pc, gw_app_t *app);

#endif
