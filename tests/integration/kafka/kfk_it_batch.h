/* SPDX-License-Identifier: Apache-2.0 */
/* kfk_it_batch.h - the batch cases of test_kfk_consumer (kfk_it_batch.c). */
#ifndef KFK_IT_BATCH_H
#define KFK_IT_BATCH_H

#include "kfk_it.h"

void kit_batch_many_to_a_transaction(void **state);
void kit_batch_retry_rolls_back_and_splits(void **state);
void kit_batch_poison_is_dead_lettered(void **state);
void kit_batch_failed_commit_hands_it_again(void **state);
void kit_batch_interval_commits_in_the_background(void **state);

#endif
