/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * walk_record.h - whether one entry record matches: its constraints
 * (range lists, masks, set bits) by the one-lookup fast path or one by
 * one, and its stateful condition (stateful.h).  Used by the merge
 * (walk_merge.h).
 */
#ifndef PARAPET_LIB_WALK_RECORD_H
#define PARAPET_LIB_WALK_RECORD_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parapet.h"
#include "image.h"
#include "maps.h"
#include "walk_state.h"
#include "stateful.h"
#include "image_read.h"
#include "walk_key.h"
#include "patterns.h"

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
	/* -m string: the rows this constraint names are searched now (once
	 * per packet each), then compared as any wide masked constraint */
	if (field == PARAPET_IMG_PATTERN_FIELD) {
		if (!(c & PARAPET_IMG_MASKED_BIT) || !(c & PARAPET_IMG_WIDE_BIT)) {
			w->err = 23;
			return 1;
		}
		if (patterns_fill(w, w->cpos))
			return 1;
		w->val[0] = w->key[PARAPET_KW_PATTERNS];
		w->val[1] = w->key[PARAPET_KW_PATTERNS + 1];
		w->val[2] = w->key[PARAPET_KW_PATTERNS + 2];
		w->val[3] = w->key[PARAPET_KW_PATTERNS + 3];
		w->wide = 1;
		return masked_step(w, c);
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
	if (w->err || !stateful_admit(w->slot << 16 | row, kind,
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

#endif /* PARAPET_LIB_WALK_RECORD_H */
