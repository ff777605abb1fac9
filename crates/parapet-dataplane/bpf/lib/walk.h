/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * walk.h - the BPF walker of the classifier image (docs/image-format.md).
 *
 * Verifier strategy: every loop is an open-coded iterator (walk_for,
 * walk_state.h) and the loop state lives in a per-CPU scratch map value,
 * not in registers: a load from a map value is a number the verifier cannot
 * predict, so each loop body's state repeats after one pass and the
 * verifier stops there instead of following nested bounded loops (tree
 * depth 64 x partitions 8 x candidates x constraints x a range search would
 * exceed its complexity budget).  The scratch value is looked up once per
 * packet and its pointer stays in a register (until issue 15 every loop was
 * a bpf_loop() callback that looked the state up again, and every iteration
 * was an indirect call).  The
 * image itself is untrusted: every word read is bounds-checked against the
 * slot, tree descent must move to strictly higher node indices, and loop
 * counts are capped by the format's absolute limits.  Any inconsistency sets
 * w->err and the walk is abandoned (the caller falls back).
 *
 * Algorithm: the general path of the spec, which is exact for every image
 * (and equals the fast path on PURE_FIRST_MATCH images): walk each
 * partition's tree to its leaf, then merge the leaves' sorted entry indices
 * in increasing order, evaluating each candidate's record; the first
 * matching Decide entry answers, Log/Count/Jump entries are recorded as
 * non-terminal matches, Return entries skip ahead to their resume index.
 *
 * The parts, one header each: image_read.h (bounds-checked image reads),
 * walk_key.h (the image key: built, and read by field), walk_tree.h (tree
 * descent to each partition's leaf), walk_record.h (does one entry record
 * match), walk_merge.h (the merge of the leaves); image_walk, here, runs
 * them in that order.
 */
#ifndef PARAPET_LIB_WALK_H
#define PARAPET_LIB_WALK_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parapet.h"
#include "image.h"
#include "maps.h"
#include "walk_state.h"
#include "ctstate.h"
#include "sets.h"
#include "stateful.h"
#include "addr_type.h"
#include "tcp_options.h"
#include "patterns.h"
#include "rev_path.h"
#include "image_read.h"
#include "walk_key.h"
#include "walk_tree.h"
#include "walk_record.h"
#include "walk_merge.h"
#include "stage_stop.h"

/*
 * Classify `key` with the image in `slot`.  Returns the deciding rule id
 * (0 = policy) and sets w->verdict and the non-terminal list in the
 * scratch state, or returns -1 when the image is unusable.
 */
static __always_inline long image_walk(__u32 idx, __u32 slot,
				       const struct parapet_key *key)
{
	struct walk_cb_ctx c = { .idx = idx };
	struct parapet_walk *w = walk_state(&c);
	__u32 vi, code, rule, i, n_refs, rtype;
	const __u32 *H, *V;

	if (!w)
		return -1;
	PARAPET_STOP_AT(PARAPET_STOP_DECIDE, PARAPET_WALK_STOPPED);
	w->slot = slot;
	w->err = 0;
	/* The whole header through one map lookup: it always fits the
	 * slot's first page (a rd() per word was a lookup per word). */
	H = img_window(w, 0, PARAPET_IMG_HEADER_WORDS);
	if (!H || H[PARAPET_HW_MAGIC] != PARAPET_IMG_MAGIC ||
	    H[PARAPET_HW_VERSION] != PARAPET_IMG_VERSION) {
		w->err = 10;
		return -1;
	}
	w->n_parts = H[PARAPET_HW_N_PARTITIONS];
	if (w->n_parts == 0 || w->n_parts > PARAPET_IMG_MAX_PARTITIONS) {
		w->err = 11;
		return -1;
	}
	w->partitions_off = H[PARAPET_HW_PARTITIONS_OFF];
	w->nodes_off = H[PARAPET_HW_NODES_OFF];
	w->n_nodes = H[PARAPET_HW_N_NODES];
	w->fanout_off = H[PARAPET_HW_FANOUT_OFF];
	w->leaves_off = H[PARAPET_HW_LEAVES_OFF];
	w->table_off = H[PARAPET_HW_ENTRY_TABLE_OFF];
	w->n_entries = H[PARAPET_HW_N_ENTRIES];
	w->entries_off = H[PARAPET_HW_ENTRIES_OFF];
	w->verdicts_off = H[PARAPET_HW_VERDICTS_OFF];
	w->n_verdicts = H[PARAPET_HW_N_VERDICTS];
	w->policy = H[PARAPET_HW_POLICY];
	n_refs = H[PARAPET_HW_SET_REF_COUNT];
	w->total = 0;
	w->pos = 0;
	w->done = 0;
	w->n_nonterm = 0;
	w->nonterm_dropped = 0;
	w->merged = 0;
	w->parts_done = 0;
	/* pkey first: key_ifnames() reads its interface indices */
	__builtin_memcpy(&w->pkey, key, sizeof(*key));
	build_key(w, key);
	if (H[PARAPET_HW_FLAGS] & PARAPET_IMG_FLAG_ADDR_TYPES)
		parapet_addr_types_fill(w);
	/* the option kinds, for images that test them: an area the entry
	 * did not copy abandons the walk (tcp_options.h) */
	if ((H[PARAPET_HW_FLAGS] & PARAPET_IMG_FLAG_TCP_OPTIONS) &&
	    parapet_tcp_options_fill(w)) {
		w->err = 20;
		return -1;
	}
	/* the pattern hits start unsearched; an image with patterns whose
	 * datagram the entry did not copy is abandoned (patterns.h) */
	if ((H[PARAPET_HW_FLAGS] & PARAPET_IMG_FLAG_PATTERNS) &&
	    patterns_begin(w)) {
		w->err = 21;
		return -1;
	}
	/* the route back to the source, for images that read it: a hook
	 * that did not look it up (the netfilter hooks, a failed lookup)
	 * abandons the walk rather than guess (rev_path.h) */
	if ((H[PARAPET_HW_FLAGS] & PARAPET_IMG_FLAG_REV_PATH) &&
	    w->key[PARAPET_KW_REVPATH] > PARAPET_REV_PATH_NONE) {
		w->err = 24;
		return -1;
	}
	/* nothing to do (not even the clock) for images without sets */
	set_bits(w, &c, n_refs);
	PARAPET_STOP_AT(PARAPET_STOP_KEY, PARAPET_WALK_STOPPED);

	/* Partition 0 without a call when its root is a leaf (most small
	 * images have one partition); the rest in one call. */
	w->ref = rd(w, w->partitions_off);
	if (!((w->ref & PARAPET_IMG_LEAF_BIT) && leaf_cursor(w, 0)) &&
	    w->parts_done < w->n_parts)
		parapet_partitions(w);
	if (w->err || w->parts_done != w->n_parts) {
		w->err = w->err ? w->err : 19;
		return -1;
	}
	PARAPET_STOP_AT(PARAPET_STOP_DESCENT, PARAPET_WALK_STOPPED);
	/* Each merge step consumes one leaf element; the one that takes the
	 * last ends the merge.  An iterator runs at most 1 << 23 times. */
	if (w->total >= PARAPET_IMG_MAX_LEAF) {
		w->err = 12;
		return -1;
	}
	w->left = w->total;
	/* The first step without an iterator: a first candidate that
	 * decides, the only candidate, or none at all ends the merge here.
	 * At most max(total, 1) steps in all. */
	if (!parapet_merge_step(w, idx)) {
		walk_for(i, w->total) {
			if (parapet_merge_step(w, idx))
				break;
		}
	}
	/* a merge that neither decided nor ran out of candidates (an
	 * iteration cap) must not fall through to the policy */
	if (w->err || !w->merged) {
		w->err = w->err ? w->err : 17;
		return -1;
	}
	PARAPET_STOP_AT(PARAPET_STOP_MERGE, PARAPET_WALK_STOPPED);

	if (w->done) {
		rule = w->entry_rule;
		vi = (w->stateful_k >> 8) & 0xff;
	} else {
		rule = 0;
		vi = w->policy;
	}
	if (vi >= w->n_verdicts) {
		w->err = 13;
		return -1;
	}
	/* the verdict row through one lookup when it sits in one page */
	V = img_window(w, w->verdicts_off + vi * PARAPET_IMG_VERDICT_WORDS,
		       PARAPET_IMG_VERDICT_WORDS);
	if (V) {
		code = V[0];
		rtype = V[3];
	} else {
		code = rd(w, w->verdicts_off + vi * PARAPET_IMG_VERDICT_WORDS);
		rtype = rd(w, w->verdicts_off + vi * PARAPET_IMG_VERDICT_WORDS + 3);
	}
	if (w->err || code > 3) {
		w->err = w->err ? w->err : 14;
		return -1;
	}
	/* 2 = REJECT, 3 = REJECT with a type.  The row's 4th word is the
	 * PARAPET_REJECT_* type (0, the default, in images that predate it);
	 * it rides in bits 8..15 of the verdict to the hook's reply code. */
	w->verdict = code == 0 ? PARAPET_VERDICT_ACCEPT :
		     code == 1 ? PARAPET_VERDICT_DROP :
				 PARAPET_VERDICT_REJECT;
	if (code >= 2)
		w->verdict |= (rtype > 0xff ? PARAPET_REJECT_UNKNOWN : rtype) << 8;
	return rule;
}

#endif /* PARAPET_LIB_WALK_H */
