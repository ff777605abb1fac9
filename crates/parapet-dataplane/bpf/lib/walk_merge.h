/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * walk_merge.h - the merge of the partitions' leaves: candidate entries in
 * increasing order, each record evaluated (walk_record.h); the first
 * matching Decide entry ends it, Log/Count/Jump entries are recorded as
 * non-terminal matches, Return entries skip ahead.
 */
#ifndef PARAPET_LIB_WALK_MERGE_H
#define PARAPET_LIB_WALK_MERGE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parapet.h"
#include "image.h"
#include "maps.h"
#include "walk_state.h"
#include "image_read.h"
#include "walk_record.h"

static __always_inline void push_nonterm(struct parapet_walk *w, __u32 rec,
					 __u32 kind)
{
	__u32 n = w->n_nonterm;

	if (n >= PARAPET_MAX_NONTERM) {
		w->nonterm_dropped += 1;
		return;
	}
	w->nonterm_rule[n & (PARAPET_MAX_NONTERM - 1)] = rd(w, rec);
	w->nonterm_kind[n & (PARAPET_MAX_NONTERM - 1)] = kind;
	w->n_nonterm = n + 1;
}

/*
 * One merge step: take the smallest candidate index over all leaves.
 * Returns 1 to end the merge.  idx: the scratch slot, for stateful_cb.
 *
 * Runs in a global function (parapet_merge_step): the verifier checks it
 * once, on its own, and its caller sees only "some number" come back, so
 * the merge loop's state
 * repeats after one pass.  Inlined, the branches of the leaf scan left
 * different constants in registers at each iteration and the verifier
 * followed iteration after iteration ("the sequence of 8193 jumps is too
 * complex").  The verifier lets w be NULL here.
 */
static __always_inline long merge_step(struct parapet_walk *w, __u32 idx)
{
	struct walk_cb_ctx c = { .idx = idx };
	__u32 best = 0xffffffff, bp = PARAPET_IMG_MAX_PARTITIONS;
	__u32 p, rec, nc, k, stateful, cur;
	const __u32 *R;

	if (!w)
		return 1;

#pragma unroll
	for (p = 0; p < PARAPET_IMG_MAX_PARTITIONS; p++) {
		if (p < w->n_parts && w->cur[p] < w->end[p] &&
		    w->head[p] < best) {
			best = w->head[p];
			bp = p;
		}
	}
	if (bp >= PARAPET_IMG_MAX_PARTITIONS) {
		w->merged = 1;
		return 1; /* candidates exhausted: the policy decides */
	}
	/* advance the chosen leaf and cache its next head */
	bp &= PARAPET_IMG_MAX_PARTITIONS - 1;
	cur = w->cur[bp] + 1;
	w->cur[bp] = cur;
	w->left -= 1;
	if (cur < w->end[bp])
		w->head[bp] = rd(w, cur);
	if (w->err)
		return 1;
	if (best < w->pos)
		return 0; /* skipped by a RETURN, or seen in another leaf */
	w->pos = best + 1;
	if (best >= w->n_entries) {
		w->err = 8;
		return 1;
	}
	rec = w->entries_off + rd(w, w->table_off + best);
	/* the record's head through one lookup when it sits in one page */
	R = img_window(w, rec, PARAPET_REC_WINDOW);
	k = R ? R[1] : rd(w, rec + 1);
	nc = (k >> 16) & 0xff;
	if (nc > PARAPET_IMG_MAX_CONSTRAINTS) {
		w->err = 9;
		return 1;
	}
	/* A stateful entry takes the general path: its condition is the
	 * constraint loop's last step. */
	w->stateful_k = k;
	stateful = (k & PARAPET_IMG_KIND_STATEFUL_BIT) ? 1 : 0;
	switch (stateful ? -1 : record_fast(w, R, nc)) {
	case 0:
		return 0;
	case 1:
		break;
	default:
		if (parapet_record_general(w, rec, nc))
			return 1;
		/* then the stateful condition, if any (it checks cmatch); here
		 * and not in parapet_record_general, whose frame would make the
		 * call chain's stack too deep (512 bytes for all frames) */
		if (stateful)
			bpf_loop(1, stateful_cb, &c, 0);
		if (w->err)
			return 1;
		if (!w->cmatch)
			return 0;
	}
	switch (k & 0xf) {
	case PARAPET_IMG_KIND_DECIDE:
		/* rule id and kind word (its verdict index) for image_walk */
		w->done = 1;
		w->merged = 1;
		w->entry_rec = rec;
		w->entry_rule = rd(w, rec);
		return 1;
	case PARAPET_IMG_KIND_RETURN:
		if (k & PARAPET_IMG_KIND_COUNTED_BIT)
			push_nonterm(w, rec, PARAPET_IMG_KIND_RETURN);
		w->pos = rd(w, rec + 2);
		return w->err ? 1 : 0;
	default:
		push_nonterm(w, rec, k & 0xf);
		return w->err ? 1 : 0;
	}
}

/*
 * One merge step (merge_step), and the end of the merge when the step took
 * the last leaf element without deciding: the step after it would only
 * find the leaves empty, and on the common packet with one candidate that
 * saved step is the whole iterator (three kfunc calls and a step, each a
 * call and a return).
 */
__noinline long parapet_merge_step(struct parapet_walk *w, __u32 idx)
{
	long r;

	if (!w)
		return 1;
	r = merge_step(w, idx);
	if (!r && !w->left) {
		w->merged = 1;
		return 1; /* candidates exhausted: the policy decides */
	}
	return r;
}

#endif /* PARAPET_LIB_WALK_MERGE_H */
