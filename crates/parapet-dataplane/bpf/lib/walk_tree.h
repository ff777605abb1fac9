/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * walk_tree.h - the walker's tree descent: each partition's tree walked to
 * its leaf and the leaf's cursor set up for the merge (walk_merge.h).
 */
#ifndef PARAPET_LIB_WALK_TREE_H
#define PARAPET_LIB_WALK_TREE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parapet.h"
#include "image.h"
#include "maps.h"
#include "walk_state.h"
#include "image_read.h"
#include "walk_key.h"

/* One step down a tree: w->ref is a node; move to the chosen child.
 * Returns 1 to end the descent. */
static __always_inline long descend_step(struct parapet_walk *w)
{
	__u32 v[4], cut[4], ref, node, next, w0;
	int k;

	ref = w->ref;
	if (ref & PARAPET_IMG_LEAF_BIT)
		return 1;
	if (ref >= w->n_nodes) {
		w->err = 2;
		return 1;
	}
	node = w->nodes_off + ref * PARAPET_IMG_NODE_WORDS;
	/* Usual case: the whole node in one page, one lookup. */
	{
		const __u32 *n = img_window(w, node, PARAPET_IMG_NODE_WORDS);

		if (n && ((n[0] >> 8) & 0xff) == PARAPET_IMG_NODE_BINARY) {
			if (key_value(w, n[0] & 0xff, v) < 0) {
				w->err = 3;
				return 1;
			}
#pragma unroll
			for (k = 0; k < 4; k++)
				cut[k] = n[4 + k];
			next = cmp128(v, cut) <= 0 ? n[1] : n[2];
			goto advance;
		}
	}
	w0 = rd(w, node);
	if (key_value(w, w0 & 0xff, v) < 0) {
		w->err = 3;
		return 1;
	}
	switch ((w0 >> 8) & 0xff) {
	case PARAPET_IMG_NODE_BINARY:
#pragma unroll
		for (k = 0; k < 4; k++)
			cut[k] = rd(w, node + 4 + k);
		next = rd(w, node + (cmp128(v, cut) <= 0 ? 1 : 2));
		break;
	case PARAPET_IMG_NODE_MULTIWAY: {
		/* 2^bits equal-width children over the field's low word */
		__u32 off = rd(w, node + 1), bs = rd(w, node + 2);
		__u32 lo = rd(w, node + 3);
		__u32 bits = bs & 0xff, shift = (bs >> 8) & 0xff, idx;

		if (bits < 1 || bits > PARAPET_IMG_MAX_FANOUT_BITS ||
		    bits + shift > 32) {
			w->err = 15;
			return 1;
		}
		idx = (v[0] - lo) >> (shift & 31);
		/* a no-op on a correct image; bounds the fanout read */
		if (idx > (1u << bits) - 1)
			idx = (1u << bits) - 1;
		next = rd(w, w->fanout_off + off + idx);
		break;
	}
	default:
		w->err = 16;
		return 1;
	}
advance:
	/* Children follow their parent: this also rules out cycles. */
	if (!(next & PARAPET_IMG_LEAF_BIT) && next <= ref)
		w->err = 4;
	w->ref = next;
	return w->err ? 1 : 0;
}

/* Partition p's leaf cursor, once w->ref is its leaf.  Returns 1 on an
 * error. */
static __always_inline long leaf_cursor(struct parapet_walk *w, __u32 p)
{
	__u32 leaf, count;

	leaf = w->leaves_off + (w->ref & ~PARAPET_IMG_LEAF_BIT);
	count = rd(w, leaf);
	if (count > PARAPET_IMG_MAX_LEAF) {
		w->err = 6;
		return 1;
	}
	w->cur[p & (PARAPET_IMG_MAX_PARTITIONS - 1)] = leaf + 1;
	w->end[p & (PARAPET_IMG_MAX_PARTITIONS - 1)] = leaf + 1 + count;
	w->head[p & (PARAPET_IMG_MAX_PARTITIONS - 1)] = count ? rd(w, leaf + 1) : 0;
	w->total += count;
	w->parts_done = p + 1;
	return w->err ? 1 : 0;
}

/*
 * Walk the trees of partitions parts_done .. n_parts-1 to their leaves and
 * set up their leaf cursors, all in one call.  Returns 1 on an error.
 * Global for the reason given at parapet_merge_step, and so that its loops'
 * stack is not part of the merge's call chain (512 bytes for all frames).
 * Both loops are may_goto loops (loop_budget_spent) with their counters in
 * the scratch state: no iterator kfunc calls (three per loop, and one more
 * per pass), and no call per partition.  A root that is a leaf (tiny
 * images) in partition 0 never gets here: image_walk sets its cursor up
 * itself, a call saved.
 */
__noinline long parapet_partitions(struct parapet_walk *w)
{
	__u32 p;
	budget_loop_var(pass);
	budget_loop_var(step);

	if (!w)
		return 1;
	budget_loop(pass, PARAPET_IMG_MAX_PARTITIONS + 1) {
		/* volatile: reloaded from the map value on every pass, so the
		 * verifier sees an unknown number and the loop converges (a
		 * counter the compiler keeps in a register grows a range per
		 * pass, and the verifier follows every pass) */
		p = *(volatile __u32 *)&w->parts_done;
		if (loop_budget_spent() || p >= w->n_parts)
			break;
		if (p >= PARAPET_IMG_MAX_PARTITIONS) {
			w->err = 18;
			return 1;
		}
		w->ref = rd(w, w->partitions_off +
				       p * PARAPET_IMG_PARTITION_WORDS);
		*(volatile __u32 *)&w->depth = 0;
		budget_loop(step, PARAPET_IMG_MAX_DEPTH + 1) {
			if (w->ref & PARAPET_IMG_LEAF_BIT)
				break;
			if (loop_budget_spent() ||
			    (*(volatile __u32 *)&w->depth)++ >=
				    PARAPET_IMG_MAX_DEPTH ||
			    descend_step(w))
				break;
		}
		if (!w->err && !(w->ref & PARAPET_IMG_LEAF_BIT))
			w->err = 5; /* deeper than the format allows */
		if (w->err || leaf_cursor(w, p))
			return 1;
	}
	/* A loop budget spent before the last partition would leave its
	 * rules out of the merge: an error, so the packet fails closed. */
	if (!w->err && *(volatile __u32 *)&w->parts_done < w->n_parts)
		w->err = 19;
	return w->err ? 1 : 0;
}

#endif /* PARAPET_LIB_WALK_TREE_H */
