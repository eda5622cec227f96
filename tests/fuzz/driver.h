/* SPDX-License-Identifier: Apache-2.0 */
/*
 * driver.h - what a fuzz harness under tests/fuzz provides, so that one
 * harness runs both under libFuzzer (clang, -fsanitize=fuzzer) and under
 * driver.c, the deterministic driver every compiler builds and ctest runs
 * with a bounded number of inputs.
 */
#ifndef FUZZ_DRIVER_H
#define FUZZ_DRIVER_H

#include <stddef.h>
#include <stdint.h>

/* The harness: abort()s on any violation of what it checks. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Fragments of the harness's input format that driver.c's mutations splice
 * in, so they reach deeper than random bytes do. */
extern const char *const fuzz_tokens[];
extern const size_t fuzz_n_tokens;

#endif
