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

/*
 * Image access: 32-bit word `word` of image slot `slot`, or -1 when the word
 * lies outside the slot.  Every image read of the walker goes through here,
 * so an image can never make the program read outside its slot.
 */
static __always_inline int image_word(__u32 slot, __u32 word, __u32 *out)
{
	if ((word / PARAPET_IMAGE_PAGE_WORDS) >= parapet_slot_pages)
		return -1;
	__u32 page = slot * parapet_slot_pages + word / PARAPET_IMAGE_PAGE_WORDS;
	struct parapet_image_page *pg = bpf_map_lookup_elem(&parapet_image, &page);
	if (!pg)
		return -1;
	*out = pg->w[word & (PARAPET_IMAGE_PAGE_WORDS - 1)];
	return 0;
}

/* Image word `word` of the walk's slot; a failed read poisons the walk. */
static __always_inline __u32 rd(struct parapet_walk *w, __u32 word)
{
	__u32 v = 0;

	if (image_word(w->slot, word, &v) < 0)
		w->err = 1;
	return v;
}

/*
 * n consecutive words at `word` of the walk's slot through one map lookup,
 * or NULL when they straddle a page (the caller then reads word by word).
 * n must be a constant; the bound on `in` is what lets the verifier accept
 * reads up to p[n - 1].
 */
static __always_inline const __u32 *img_window(struct parapet_walk *w,
					       __u32 word, const __u32 n)
{
	__u32 in = word & (PARAPET_IMAGE_PAGE_WORDS - 1);
	__u32 page;
	struct parapet_image_page *pg;

	if (in > PARAPET_IMAGE_PAGE_WORDS - n)
		return 0;
	if ((word / PARAPET_IMAGE_PAGE_WORDS) >= parapet_slot_pages)
		return 0;
	page = w->slot * parapet_slot_pages + word / PARAPET_IMAGE_PAGE_WORDS;
	pg = bpf_map_lookup_elem(&parapet_image, &page);
	if (!pg)
		return 0;
	return &pg->w[in];
}

/* Compare two 128-bit values stored least significant word first. */
static __always_inline int cmp128(const __u32 *a, const __u32 *b)
{
	int k;

#pragma unroll
	for (k = 3; k >= 0; k--) {
		if (a[k] < b[k])
			return -1;
		if (a[k] > b[k])
			return 1;
	}
	return 0;
}

/*
 * Each fixed field's first key word (image.h's layout), with
 * PARAPET_KW_WIDE for the 128-bit fields (addresses, interface names, the
 * source MAC).  A table, not a switch case per field: the verifier walks
 * every case as a path of its own at every call in every loop iteration
 * (one more case took the tc placement's ingress program past its million
 * instructions); a load from .rodata with a bounded index is one path.
 */
#define PARAPET_KW_WIDE 0x80
static const __u8 parapet_key_word_of[PARAPET_IMG_FIXED_FIELDS] = {
	PARAPET_KW_FAMILY,
	PARAPET_KW_SADDR | PARAPET_KW_WIDE,
	PARAPET_KW_DADDR | PARAPET_KW_WIDE,
	PARAPET_KW_PROTO,
	PARAPET_KW_SPORT,
	PARAPET_KW_DPORT,
	PARAPET_KW_ICMP,
	PARAPET_KW_TCPFLAGS,
	PARAPET_KW_IIF | PARAPET_KW_WIDE,
	PARAPET_KW_OIF | PARAPET_KW_WIDE,
	PARAPET_KW_CTSTATE,
	PARAPET_KW_FRAGMENT,
	PARAPET_KW_TTL,
	PARAPET_KW_DSCP,
	PARAPET_KW_LENGTH,
	PARAPET_KW_CTSTATUS,
	PARAPET_KW_MARK,
	PARAPET_KW_CTMARK,
	PARAPET_KW_CTORIGDPORT,
	PARAPET_KW_CTPROTO,
	PARAPET_KW_STYPE,
	PARAPET_KW_DTYPE,
	PARAPET_KW_PKTTYPE,
	PARAPET_KW_MACSRC | PARAPET_KW_WIDE,
	PARAPET_KW_RT,
	PARAPET_KW_SKUID,
	PARAPET_KW_SKGID,
};
_Static_assert(PARAPET_IMG_FIXED_FIELDS == 27, "one table entry per fixed field");
_Static_assert(PARAPET_KW_MACSRC + 4 <= PARAPET_IMG_KEY_WORDS,
	       "every entry's 4 words are inside the key");

/* The key's value of `field` as 4 words (zero-extended); -1 if unknown.
 * Four words are read for every field and the upper three masked off for
 * the 32-bit ones: no branch on the width. */
static __always_inline int key_value(struct parapet_walk *w, __u32 field,
				     __u32 *v)
{
	__u32 e, off, wide;

	if (field == 8 || field == 9)
		key_ifnames(w);
	if (field >= PARAPET_IMG_FIXED_FIELDS)
		return -1;
	e = parapet_key_word_of[field];
	off = e & ~PARAPET_KW_WIDE;
	wide = -(e >> 7); /* all ones for a 128-bit field, else 0 */
	/* the key array has 3 words of padding after the last (walk_state.h):
	 * the masked-off reads of a one-word field at its end stay inside */
	if (off > PARAPET_IMG_KEY_WORDS - 1)
		return -1;
	v[0] = w->key[off];
	v[1] = w->key[off + 1] & wide;
	v[2] = w->key[off + 2] & wide;
	v[3] = w->key[off + 3] & wide;
	return 0;
}

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

/* One halving of the search for the last range with lo <= value. */
static __always_inline long bsearch_step(struct parapet_walk *w)
{
	__u32 b[4], mid, at;

	if (w->lo >= w->hi)
		return 1;
	mid = w->lo + (w->hi - w->lo) / 2;
	at = w->base + mid * w->stride;
	b[0] = rd(w, at);
	b[1] = w->wide ? rd(w, at + 1) : 0;
	b[2] = w->wide ? rd(w, at + 2) : 0;
	b[3] = w->wide ? rd(w, at + 3) : 0;
	if (cmp128(b, w->val) <= 0)
		w->lo = mid + 1;
	else
		w->hi = mid;
	return w->err ? 1 : 0;
}

/* Evaluate one constraint at w->cpos; clear w->cmatch if it fails. */
#define PARAPET_IMG_SHORT_RANGES 4

/*
 * A masked constraint (c has PARAPET_IMG_MASKED_BIT), the key value in
 * w->val and w->wide set: key & mask == value, or != with
 * PARAPET_IMG_MASK_NEGATE_BIT.  The body is the mask then the value, one
 * word each (narrow: the value's upper words meet a zero mask) or four.
 *
 * Words are read through img_window (a pointer, one exit on failure), not
 * rd(): with rd()'s stack temporary and error branch per word, the
 * constraint loop's paths multiplied and the tc placement's ingress
 * program (with the conntrack lookup) passed the verifier's million
 * instructions.  Not a global function: any further frame puts the
 * netfilter program's call chain over the verifier's 512 bytes of stack
 * (each frame counts at least 32).
 */
static __always_inline long masked_step(struct parapet_walk *w, __u32 c)
{
	const __u32 *mask, *val;
	__u32 n, k, diff = 0;

	if (!w)
		return 1;
	n = w->wide ? 4 : 1;
	for (k = 0; k < 4; k++) {
		if (k >= n)
			break;
		mask = img_window(w, w->cpos + k, 1);
		val = img_window(w, w->cpos + n + k, 1);
		if (!mask || !val) {
			w->err = 1;
			return 1;
		}
		diff |= (w->val[k] & *mask) ^ *val;
	}
	w->cpos += 2 * n;
	if ((diff == 0) == ((c & PARAPET_IMG_MASK_NEGATE_BIT) != 0)) {
		w->cmatch = 0;
		return 1;
	}
	return 0;
}

static __always_inline long constraint_step(struct parapet_walk *w)
{
	__u32 c, field, r, b[4], at, s;

	c = rd(w, w->cpos);
	field = c & 0xff;
	r = c >> 16;
	w->cpos += 1;
	if (field == PARAPET_IMG_SET_FIELD) {
		__u32 mlo = rd(w, w->cpos), mhi = rd(w, w->cpos + 1);
		__u32 wlo = rd(w, w->cpos + 2), whi = rd(w, w->cpos + 3);

		w->cpos += 4;
		if ((w->key[PARAPET_KW_SETS] & mlo) != wlo ||
		    (w->key[PARAPET_KW_SETS + 1] & mhi) != whi) {
			w->cmatch = 0;
			return 1;
		}
		return w->err ? 1 : 0;
	}
	if (key_value(w, field, w->val) < 0) {
		w->err = 7;
		return 1;
	}
	w->wide = (c & PARAPET_IMG_WIDE_BIT) ? 1 : 0;
	if (c & PARAPET_IMG_MASKED_BIT)
		return masked_step(w, c);
	w->stride = w->wide ? 8 : 2;
	w->base = w->cpos;
	w->lo = 0;
	w->hi = r;
	w->cpos += r * w->stride;
	/* Narrow ranges have 32-bit bounds: a wider value is outside. */
	if (!w->wide && (w->val[1] | w->val[2] | w->val[3])) {
		w->cmatch = 0;
		return 1;
	}
	/* Fastest path: few narrow ranges within one page, one lookup. */
	if (!w->wide && r <= PARAPET_IMG_SHORT_RANGES) {
		const __u32 *p = img_window(w, w->base,
					    2 * PARAPET_IMG_SHORT_RANGES);
		if (p) {
			__u32 v = w->val[0];
			int j;

			/* a bounded loop: clang need not unroll it */
			for (j = 0; j < PARAPET_IMG_SHORT_RANGES; j++) {
				if (j >= r || p[2 * j] > v)
					break; /* sorted: no later range holds v */
				if (v <= p[2 * j + 1])
					return 0; /* hit: next constraint */
			}
			w->cmatch = 0;
			return 1;
		}
	}
	/* Few ranges (the usual case): scan them here, cheaper than the
	 * search loop.  Sorted: stop at the first lower bound above v. */
	if (r <= PARAPET_IMG_SHORT_RANGES) {
		int j;

		for (j = 0; j < PARAPET_IMG_SHORT_RANGES; j++) {
			if (j >= r)
				break;
			at = w->base + j * w->stride;
			b[0] = rd(w, at);
			b[1] = w->wide ? rd(w, at + 1) : 0;
			b[2] = w->wide ? rd(w, at + 2) : 0;
			b[3] = w->wide ? rd(w, at + 3) : 0;
			if (cmp128(b, w->val) > 0)
				break;
			w->lo = j + 1;
		}
	} else {
		/* Ranges are sorted and disjoint: the only candidate is the
		 * last one whose lower bound is <= the value. */
		walk_for(s, PARAPET_IMG_BSEARCH_STEPS) {
			if (bsearch_step(w))
				break;
		}
	}
	if (w->err)
		return 1;
	if (w->lo == 0) {
		w->cmatch = 0;
		return 1;
	}
	at = w->base + (w->lo - 1) * w->stride + (w->wide ? 4 : 1);
	b[0] = rd(w, at);
	b[1] = w->wide ? rd(w, at + 1) : 0;
	b[2] = w->wide ? rd(w, at + 2) : 0;
	b[3] = w->wide ? rd(w, at + 3) : 0;
	if (cmp128(w->val, b) > 0) {
		w->cmatch = 0;
		return 1;
	}
	return w->err ? 1 : 0;
}

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
 * The common record in one map lookup: when the record's first
 * PARAPET_REC_WINDOW words lie in one page (R, from img_window; NULL when
 * they do not) and every constraint is narrow,
 * has at most PARAPET_IMG_SHORT_RANGES ranges and is not the set field,
 * decide it here.  Returns 1 (match), 0 (no match) or -1 (use the general
 * per-constraint path).
 */
#define PARAPET_REC_WINDOW 64
/* The unrolled check stops at 16 constraints: the verifier follows each
 * step, and a record with more takes the general path (a bpf iterator). */
#define PARAPET_REC_FAST_CONSTRAINTS 16

static __always_inline int record_fast(struct parapet_walk *w,
				       const __u32 *R, __u32 nc)
{
	__u32 pos = PARAPET_IMG_RECORD_HEADER_WORDS, ci;

	if (!R || nc > PARAPET_REC_FAST_CONSTRAINTS)
		return -1;
	for (ci = 0; ci < PARAPET_REC_FAST_CONSTRAINTS; ci++) {
		__u32 c, r, j, v[4], hit = 0;

		if (ci >= nc)
			return 1;
		/* room for the constraint word and its ranges */
		if (pos > PARAPET_REC_WINDOW - 1 - 2 * PARAPET_IMG_SHORT_RANGES)
			return -1;
		c = R[pos & (PARAPET_REC_WINDOW - 1)];
		r = c >> 16;
		if ((c & (PARAPET_IMG_WIDE_BIT | PARAPET_IMG_MASKED_BIT)) ||
		    (c & 0xff) >= PARAPET_IMG_SET_FIELD ||
		    r > PARAPET_IMG_SHORT_RANGES)
			return -1;
		if (key_value(w, c & 0xff, v) < 0)
			return -1;
		/* narrow bounds: a value above 32 bits is outside */
		if (v[1] | v[2] | v[3])
			return 0;
		for (j = 0; j < PARAPET_IMG_SHORT_RANGES; j++) {
			__u32 at = pos + 1 + 2 * j;

			if (j >= r ||
			    R[at & (PARAPET_REC_WINDOW - 1)] > v[0])
				break;
			if (v[0] <= R[(at + 1) & (PARAPET_REC_WINDOW - 1)]) {
				hit = 1;
				break;
			}
		}
		if (!hit)
			return 0;
		pos += 1 + 2 * r;
	}
	return 1;
}

/*
 * The stateful condition of the record whose kind word is w->stateful_k,
 * once its constraints matched (w->cmatch): its row's words are read here,
 * where the slot is, and checked by stateful.h; a failure clears cmatch.
 * A bpf_loop callback run 0 or 1 times, so the merge step gains no branch
 * and no stack (the walk is near the verifier's complexity and stack
 * limits).
 */
static long stateful_cb(__u32 i, void *ctx)
{
	struct parapet_walk *w = walk_state(ctx);
	__u32 row, at, kind;

	if (!w || !w->cmatch)
		return 1;
	row = w->stateful_k >> PARAPET_IMG_STATEFUL_ROW_SHIFT;
	if (row >= rd(w, PARAPET_HW_N_STATEFUL)) {
		w->cmatch = 0;
		return 1;
	}
	at = rd(w, PARAPET_HW_STATEFUL_OFF) +
	     row * PARAPET_IMG_STATEFUL_ROW_WORDS + 1;
	/* the row's parameters in the (now idle) range-search words: the
	 * call chain's stack is near the verifier's 512 bytes */
	kind = rd(w, at);
	w->val[0] = rd(w, at + 1);
	w->val[1] = rd(w, at + 2);
	w->val[2] = rd(w, at + 3);
	w->val[3] = rd(w, at + 4);
	if (w->err || !stateful_admit((w->slot & 1) << 16 | row, kind,
				      (__u64)w->val[0] | (__u64)w->val[1] << 32,
				      (__u64)w->val[2] | (__u64)w->val[3] << 32,
				      &w->pkey, ((struct walk_cb_ctx *)ctx)->idx))
		w->cmatch = 0;
	return 1;
}

/*
 * A record the fast path cannot decide: its constraints one by one.
 * Leaves the answer in w->cmatch; returns 1 on an error (w->err).  Global
 * for the reason given at parapet_merge_step: the constraint loop's state
 * then repeats after one pass.
 */
__noinline long parapet_record_general(struct parapet_walk *w, __u32 rec,
				       __u32 nc)
{
	__u32 ci;

	if (!w)
		return 1;
	w->cpos = rec + PARAPET_IMG_RECORD_HEADER_WORDS;
	w->cmatch = 1;
	walk_for(ci, nc) {
		if (constraint_step(w))
			break;
	}
	return w->err ? 1 : 0;
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

/* The image key of docs/image-format.md from the parsed packet key (the
 * interface names: key_ifnames, on first use). */
static __always_inline void build_key(struct parapet_walk *w,
				      const struct parapet_key *key)
{
	int k;

#pragma unroll
	for (k = 0; k < 4; k++) {
		/* word k holds bits 32k..32k+31: bytes 12-4k .. 15-4k */
		w->key[PARAPET_KW_SADDR + k] = be32_at(&key->src[12 - 4 * k]);
		w->key[PARAPET_KW_DADDR + k] = be32_at(&key->dst[12 - 4 * k]);
		w->key[PARAPET_KW_IIF + k] = 0;
		w->key[PARAPET_KW_OIF + k] = 0; /* key_ifnames() fills them */
	}
	w->key[PARAPET_KW_FAMILY] = key->family;
	w->key[PARAPET_KW_PROTO] = key->proto;
	w->key[PARAPET_KW_SPORT] = key->sport;
	w->key[PARAPET_KW_DPORT] = key->dport;
	w->key[PARAPET_KW_ICMP] = ((__u32)key->icmp_type << 8) | key->icmp_code;
	w->key[PARAPET_KW_TCPFLAGS] = key->tcp_flags;
	w->key[PARAPET_KW_CTSTATE] = key_ctstate(key);
	w->key[PARAPET_KW_FRAGMENT] = (key->frag & PARAPET_FRAG_LATER) ? 1 : 0;
	w->key[PARAPET_KW_TTL] = key->ttl;
	w->key[PARAPET_KW_DSCP] = key->dscp;
	w->key[PARAPET_KW_LENGTH] = key->pkt_len;
	w->key[PARAPET_KW_CTSTATUS] = key->flags >> PARAPET_KEY_CT_STATUS_SHIFT;
	w->key[PARAPET_KW_MARK] = w->ext.mark;
	w->key[PARAPET_KW_CTMARK] = w->ext.ct_mark;
	w->key[PARAPET_KW_CTORIGDPORT] = w->ext.ct_orig_dport;
	w->key[PARAPET_KW_CTPROTO] = w->ext.ct_proto;
	w->key[PARAPET_KW_MACSRC] = be32_at(&w->ext.mac_src[2]);
	w->key[PARAPET_KW_MACSRC + 1] = (__u32)w->ext.mac_present << 16 |
					(__u32)w->ext.mac_src[0] << 8 |
					w->ext.mac_src[1];
	w->key[PARAPET_KW_MACSRC + 2] = 0;
	w->key[PARAPET_KW_MACSRC + 3] = 0;
	/* the address types (ids 20, 21): UNSPEC here, typed after this by
	 * parapet_addr_types_fill when the image reads them (addr_type.h);
	 * the packet type (id 22) from the key extension */
	w->key[PARAPET_KW_STYPE] = 0;
	w->key[PARAPET_KW_DTYPE] = 0;
	w->key[PARAPET_KW_PKTTYPE] = w->ext.pkt_type;
	w->key[PARAPET_KW_RT] = w->ext.rt;
	w->key[PARAPET_KW_SKUID] = w->ext.sk_uid;
	w->key[PARAPET_KW_SKGID] = w->ext.sk_gid;
	w->key[PARAPET_KW_SETS] = 0; /* set_bits() fills these */
	w->key[PARAPET_KW_SETS + 1] = 0;
	w->ifn_done = 0;
}

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
	/* nothing to do (not even the clock) for images without sets */
	set_bits(w, &c, n_refs);

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
