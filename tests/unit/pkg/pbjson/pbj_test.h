/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pbj_test.h - helpers for the pbjson unit tests: a counting allocator that
 * can fail the Nth allocation (curl's torture idea), and one-line
 * encode/decode assertions.
 */
#ifndef PBJ_TEST_H
#define PBJ_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "pbj/pbjson.h"

/* Counts allocations; fails the fail_at-th one (1-based, 0: never). */
typedef struct pbjt_alloc {
    ProtobufCAllocator base;
    size_t live;  /* allocated and not yet freed */
    size_t total; /* allocations attempted */
    size_t fail_at;
} pbjt_alloc_t;

void pbjt_alloc_init(pbjt_alloc_t *a);

/* Encodes m and checks the exact output; the checks use a counting
 * allocator, so a leak fails the test too. */
void pbjt_encodes(const ProtobufCMessage *m, const char *expected);

/* Decodes json (must succeed) and returns the message, allocated with
 * malloc (free with pbj_message_free(m, NULL)). */
ProtobufCMessage *pbjt_decode(const ProtobufCMessageDescriptor *d, const char *json);

/* Decodes json, expects SVC_EINVAL and an error text containing `want`
 * (exactly equal when want starts with '='), and no leaked memory. */
void pbjt_rejects(const ProtobufCMessageDescriptor *d, const char *json, const char *want);

/* decode(json) then encode must give `canonical` (json itself when NULL). */
void pbjt_round_trips(const ProtobufCMessageDescriptor *d, const char *json, const char *canonical);

/* Runs op with the Nth allocation failing for N = 1, 2, ... until op
 * succeeds: every failure must be SVC_ENOMEM and leave nothing allocated.
 * Returns the number of allocations of the successful run. */
typedef svc_err_t (*pbjt_op_fn)(ProtobufCAllocator *a, void *ctx);
size_t pbjt_torture(pbjt_op_fn op, void *ctx);

#endif /* PBJ_TEST_H */
