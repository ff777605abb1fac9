/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * stateful.h - the stateful conditions of image entries (the image's
 * stateful table, docs/image-format.md): iptables -m limit with xt_limit.c's
 * arithmetic and nft limit rate [over] with nft_limit.c's, one bucket per
 * row of the live image.  The Rust twin is parapet_model::XtBucket /
 * NftBucket (driven by parapet_compile::ImageState); tests compare the two
 * packet by packet with the test clock below.
 *
 * Each bucket is one 64-bit word updated with one compare-and-swap, so
 * CPUs never see half an update:
 * - xt: jiffies of the last packet (low 32 bits; the gap is taken modulo
 *   2^32 jiffies, about 200 days at HZ=250) and the credit (high 32 bits);
 * - nft: the virtual time E at which the bucket held no tokens: at time t it
 *   holds min(t - E, max) tokens, which is nft_limit_eval's
 *   min(tokens + t - last, max) written with one number.
 * A bucket whose generation is not the live image's starts full: a new
 * ruleset starts with full buckets, as rules the kernel loads do.
 */
#ifndef PARAPET_LIB_STATEFUL_H
#define PARAPET_LIB_STATEFUL_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parapet.h"
#include "image.h"
#include "maps.h"

/* The kernel's HZ, set by the loader; 0 (unknown): xt limits never pass. */
const volatile __u32 parapet_hz = 0;

struct parapet_bucket {
	__u64 gen;   /* the image generation the state belongs to */
	__u64 state; /* see above */
};

/* (slot, row) -> bucket. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * PARAPET_IMG_STATEFUL_MAX_ROWS);
	__type(key, __u32);
	__type(value, struct parapet_bucket);
} parapet_buckets SEC(".maps");

/* Tests only: when [0] is non-zero, the time (ns) every check sees, with
 * jiffies = ns / (1e9 / HZ) (parapet_model::Clock). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} parapet_test_clock SEC(".maps");

static __always_inline __u64 stateful_test_ns(void)
{
	__u32 zero = 0;
	__u64 *t = bpf_map_lookup_elem(&parapet_test_clock, &zero);

	return t ? *t : 0;
}

/* CREDITS_PER_JIFFY: the largest power of two <= 0xFFFFFFFF/(HZ*86400). */
static __always_inline __u32 xt_credits_per_jiffy(__u32 hz)
{
	__u32 x = 0xffffffffu / (hz * 86400u);

	x |= x >> 1;
	x |= x >> 2;
	x |= x >> 4;
	x |= x >> 8;
	x |= x >> 16;
	return (x >> 1) + 1;
}

/* xt_limit's user2credits: u32 arithmetic, dividing first on overflow. */
static __always_inline __u32 xt_user2credits(__u32 user, __u32 hz_cpj)
{
	if (user > 0xffffffffu / hz_cpj)
		return (user / 10000u) * hz_cpj;
	return (user * hz_cpj) / 10000u;
}

/*
 * Row `slot_row & 0xffff` of the image in slot `slot_row >> 16`, whose
 * words are kind | flags, then p0..p3 (`lo` = p0 | p1 << 32, `hi` = p2 |
 * p3 << 32).  1 when the condition passes; 0 also when it cannot be
 * evaluated.
 */
static __always_inline int stateful_admit(__u32 slot_row, __u32 kind,
					  __u64 lo, __u64 hi)
{
	__u32 slot = slot_row >> 16, row = slot_row & 0xffff;
	__u32 p0 = (__u32)lo, p1 = (__u32)(lo >> 32);
	__u32 p2 = (__u32)hi, p3 = (__u32)(hi >> 32);
	__u32 zero = 0, key = (slot & 1) * PARAPET_IMG_STATEFUL_MAX_ROWS + row;
	__u32 *genp = bpf_map_lookup_elem(&parapet_gen, &zero);
	struct parapet_bucket *b;
	__u64 test_ns = stateful_test_ns(), old, next = 0;
	int pass = 0, tries;

	if (row >= PARAPET_IMG_STATEFUL_MAX_ROWS || !genp)
		return 0;
	b = bpf_map_lookup_elem(&parapet_buckets, &key);
	if (!b)
		return 0;

	if ((kind & 0xff) == PARAPET_IMG_STATEFUL_XT_LIMIT) {
		__u32 hz = parapet_hz, hz_cpj, cap, cost, now;

		if (hz == 0 || hz > 100000)
			return 0;
		hz_cpj = hz * xt_credits_per_jiffy(hz);
		cap = xt_user2credits(p0 * p1, hz_cpj);
		cost = xt_user2credits(p0, hz_cpj);
		now = test_ns ? (__u32)(test_ns / (1000000000ull / hz)) :
				(__u32)bpf_jiffies64();
		if (b->gen != *genp) {
			b->state = (__u64)now | ((__u64)cap << 32);
			b->gen = *genp;
		}
		/* Lose a race three times, keep the last answer: the bucket
		 * may then lag one packet, never run ahead of the rate. */
		for (tries = 0; tries < 3; tries++) {
			__u32 prev, credit;

			old = b->state;
			prev = (__u32)old;
			credit = (__u32)(old >> 32);
			/* the kernel adds an unsigned long to a u32: it wraps */
			credit = (__u32)((__u64)credit +
					 (__u64)(__u32)(now - prev) *
						 (hz_cpj / hz));
			if (credit > cap)
				credit = cap;
			pass = credit >= cost;
			if (pass)
				credit -= cost;
			next = (__u64)now | ((__u64)credit << 32);
			if (__sync_val_compare_and_swap(&b->state, old, next) ==
			    old)
				break;
		}
		return pass;
	}
	if ((kind & 0xff) == PARAPET_IMG_STATEFUL_NFT_LIMIT) {
		__u64 cost = (__u64)p0 | ((__u64)p1 << 32);
		__u64 max = (__u64)p2 | ((__u64)p3 << 32);
		__u64 now = test_ns ? test_ns : bpf_ktime_get_ns();
		int over = (kind & PARAPET_IMG_STATEFUL_F_OVER) != 0;

		if (b->gen != *genp) {
			b->state = now - max;
			b->gen = *genp;
		}
		for (tries = 0; tries < 3; tries++) {
			__u64 d, tokens, e;

			old = b->state;
			d = now - old;
			tokens = d > max ? max : d;
			e = d > max ? now - max : old;
			pass = tokens >= cost;
			next = pass ? e + cost : e;
			if (__sync_val_compare_and_swap(&b->state, old, next) ==
			    old)
				break;
		}
		return over ? !pass : pass;
	}
	return 0;
}

#endif /* PARAPET_LIB_STATEFUL_H */
