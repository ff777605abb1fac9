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
 *
 * nft quota (nft_quota.c): one byte count per row in the bucket's state,
 * added to atomically, reset to `used` by a new generation; the Rust twin
 * is parapet_model::Quota::admit.  nft dynamic sets (add/update/delete @s,
 * lookups): dynset.h.  Time windows (-m time, meta time|hour|day):
 * time_window.h.
 *
 * -m statistic (xt_statistic.c): --mode nth counts the packets reaching
 * the row in the bucket's state with one atomic add, shared by every CPU
 * as the kernel's per-rule counter is, and packet i (from 0 in the
 * generation) matches when i mod every == packet; --mode random compares
 * bpf_get_prandom_u32()'s low 31 bits with the stored threshold, as the
 * kernel does with get_random_u32().  The Rust twin is
 * parapet_model::Statistic.
 *
 * iptables -m recent (xt_recent.c's recent_mt): one LRU hash of (table id,
 * family, masked address) -> a ring of 32 jiffies time stamps, shared by
 * every row, image and hook naming the table, and kept across reloads (as
 * the kernel keeps a table while a rule names it).  The Rust twin is
 * parapet_model::RecentTable.  Where they differ (docs/syntax.md): the
 * kernel holds 200 addresses per table and evicts the least recently used
 * one; here PARAPET_RECENT_MAX addresses over all tables with the LRU
 * hash's approximate eviction; --reap (which only frees memory early) is
 * not done; two CPUs updating one address at once may lose one time stamp.
 */
#ifndef PARAPET_LIB_STATEFUL_H
#define PARAPET_LIB_STATEFUL_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "parapet.h"
#include "image.h"
#include "maps.h"
#include "walk_state.h"
#include "hashlimit.h"
#include "clock.h"
#include "dynset.h"
#include "time_window.h"


struct parapet_bucket {
	__u64 gen;   /* the image generation the state belongs to */
	__u64 state; /* see above */
};

/* (image slot, row) -> bucket: every hook's image numbers its rows from
 * 0, so a bucket per slot (two per image: one per generation parity), or
 * INPUT's `limit` would spend OUTPUT's. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * PARAPET_IMAGES * PARAPET_IMG_STATEFUL_MAX_ROWS);
	__type(key, __u32);
	__type(value, struct parapet_bucket);
} parapet_buckets SEC(".maps");

/* -m recent's tables.  The stamps are in time order, so "at least h
 * stamps younger than --seconds" is "the h-th newest is": one stamp is
 * read per check, whatever the hit count. */
#define PARAPET_RECENT_MAX 2048
#define PARAPET_RECENT_STAMPS 256 /* XT_RECENT_MAX_NSTAMPS */

struct parapet_recent_key {
	__u32 table;  /* FNV-1a of the name (parapet_model::table_id) */
	__u32 family; /* PARAPET_FAMILY_* */
	__u8 addr[16]; /* masked; IPv4 in the last 4 bytes, as in the key */
};

struct parapet_recent_entry {
	__u64 stamps[PARAPET_RECENT_STAMPS]; /* jiffies */
	__u32 index;			      /* where the next stamp goes */
	__u32 nstamps;			      /* valid stamps */
	__u32 ttl;	/* recorded by --set/--update; 0 (by hand): any */
	__u32 reserved;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PARAPET_RECENT_MAX);
	__type(key, struct parapet_recent_key);
	__type(value, struct parapet_recent_entry);
} parapet_recent SEC(".maps");

/* The key and a new entry are built here, not on the stack: the walk's
 * call chain is near the verifier's 512 bytes.  One per scratch slot of the
 * walk (walk_state.h): a netfilter run interrupted by a softirq's run on the
 * same CPU must not find its key overwritten. */
struct parapet_recent_scratch {
	struct parapet_recent_key key;
	struct parapet_recent_entry entry;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PARAPET_SCRATCH_NF + PARAPET_NF_NEST);
	__type(key, __u32);
	__type(value, struct parapet_recent_scratch);
} parapet_recent_scratch SEC(".maps");

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
 * recent_mt for a recent row (kind | flags, p0 table, p1 seconds, p2
 * hitcount | IPv6 prefix << 8, p3 IPv4 mask) and the packet `k`, at jiffy
 * `now`.  1 when the match answers yes.  The TTL it compares (--rttl) and
 * records is the packet's, plus one when it is forwarded (both interfaces
 * known): the kernel's "TTL as seen before forwarding"
 * (parapet_model::recent_seen_ttl).
 */
static __always_inline int recent_admit(__u32 kind, __u32 table, __u32 seconds,
					__u32 p2, __u32 mask4, __u64 now,
					__u32 hz, const struct parapet_key *k,
					__u32 nest)
{
	__u32 i, cmd, ttl, hitcount = p2 & 0xff, prefix = (p2 >> 8) & 0xff;
	int ret = (kind & PARAPET_IMG_STATEFUL_F_INVERT) != 0;
	struct parapet_recent_scratch *s;
	struct parapet_recent_entry *e;
	__u64 time, hi = ~0ull, lo = ~0ull, *a;

	cmd = (kind >> PARAPET_IMG_STATEFUL_RECENT_CMD_SHIFT) & 3;
	s = bpf_map_lookup_elem(&parapet_recent_scratch, &nest);
	if (!s)
		return 0;
	s->key.table = table;
	s->key.family = k->family;
	if (kind & PARAPET_IMG_STATEFUL_F_RDEST)
		__builtin_memcpy(s->key.addr, k->dst, 16);
	else
		__builtin_memcpy(s->key.addr, k->src, 16);
	/* The mask as two big-endian halves (the IPv4 address is the last 4
	 * bytes of the key, network order). */
	if (k->family == PARAPET_FAMILY_IPV4) {
		lo = 0xffffffff00000000ull | mask4;
	} else {
		if (prefix < 64)
			hi = prefix ? ~0ull << (64 - prefix) : 0;
		if (prefix < 128)
			lo = prefix > 64 ? ~0ull << (128 - prefix) : 0;
	}
	a = (__u64 *)s->key.addr;
	a[0] &= bpf_cpu_to_be64(hi);
	a[1] &= bpf_cpu_to_be64(lo);
	ttl = (__u8)(k->ttl + (k->ifindex && k->oifindex ? 1 : 0));
	e = bpf_map_lookup_elem(&parapet_recent, &s->key);
	/* --rttl: an entry recorded with another TTL is not found (a TTL of
	 * 0 on either side finds any) */
	if (e && (kind & PARAPET_IMG_STATEFUL_F_RTTL) && ttl && e->ttl &&
	    e->ttl != ttl)
		e = 0;
	if (!e) {
		if (cmd != 0) /* only --set adds */
			return ret;
		/* Stamps past nstamps are never read: no need to clear
		 * them (and 2 KiB is too much to clear here). */
		s->entry.stamps[0] = now;
		s->entry.nstamps = 1;
		s->entry.index = 1;
		s->entry.ttl = ttl;
		s->entry.reserved = 0;
		/* A failed insert is the kernel's failed allocation: it
		 * answers as if it had added (and hot-drops the packet). */
		bpf_map_update_elem(&parapet_recent, &s->key, &s->entry,
				    BPF_ANY);
		return !ret;
	}
	if (cmd == 3) {
		bpf_map_delete_elem(&parapet_recent, &s->key);
		return !ret;
	}
	if (cmd == 0) {
		ret = !ret;
	} else {
		__u32 h = hitcount ? hitcount : 1;

		time = now - (__u64)seconds * hz;
		if (e->nstamps >= h) {
			/* the h-th newest stamp; the kernel's
			 * !time_after(time, stamp) */
			i = (e->index - h) & (PARAPET_RECENT_STAMPS - 1);
			if (!seconds || (__s64)(e->stamps[i] - time) >= 0)
				ret = !ret;
		}
	}
	if (cmd == 0 || (cmd == 2 && ret)) {
		i = e->index & (PARAPET_RECENT_STAMPS - 1);
		e->stamps[i] = now;
		e->index = i + 1;
		if (e->index > e->nstamps)
			e->nstamps = e->index;
		e->ttl = ttl;
	}
	return ret;
}

/*
 * Row `slot_row & 0xffff` of the image in slot `slot_row >> 16`, whose
 * words are kind | flags, then p0..p3 (`lo` = p0 | p1 << 32, `hi` = p2 |
 * p3 << 32), for the packet `k` walked in scratch slot `nest`.  1 when the condition passes; 0 also
 * when it cannot be evaluated.
 */
static __always_inline int stateful_admit(__u32 slot_row, __u32 kind,
					  __u64 lo, __u64 hi,
					  const struct parapet_key *k, __u32 nest)
{
	__u32 slot = slot_row >> 16, row = slot_row & 0xffff;
	__u32 p0 = (__u32)lo, p1 = (__u32)(lo >> 32);
	__u32 p2 = (__u32)hi, p3 = (__u32)(hi >> 32);
	__u32 zero = 0, key = slot * PARAPET_IMG_STATEFUL_MAX_ROWS + row;
	__u32 *genp = bpf_map_lookup_elem(&parapet_gen, &zero);
	struct parapet_bucket *b;
	__u64 test_ns = stateful_test_ns(), old, next = 0;
	int pass = 0, tries;

	if (row >= PARAPET_IMG_STATEFUL_MAX_ROWS || !genp)
		return 0;
	if ((kind & 0xff) == PARAPET_IMG_STATEFUL_RECENT) {
		__u32 hz = parapet_hz;

		/* xt_recent counts --seconds in jiffies */
		if (hz == 0 || hz > 100000)
			return 0;
		return recent_admit(kind, p0, p1, p2, p3,
				    test_ns ? test_ns / (1000000000ull / hz) :
					      bpf_jiffies64(),
				    hz, k, nest);
	}
	if ((kind & 0xff) == PARAPET_IMG_STATEFUL_HASHLIMIT) {
		__u32 hz = parapet_hz;

		/* xt_hashlimit counts in jiffies */
		if (hz == 0 || hz > 100000)
			return 0;
		return hashlimit_admit(kind, p0, p1, p2, p3,
				       test_ns ? test_ns / (1000000000ull / hz) :
						 bpf_jiffies64(),
				       hz, k, nest);
	}
	if ((kind & 0xff) == PARAPET_IMG_STATEFUL_DYNSET)
		return dynset_admit(kind, lo, hi, k, nest);
	if ((kind & 0xff) == PARAPET_IMG_STATEFUL_TIME)
		return time_admit(kind, lo, hi);
	if ((kind & 0xff) == PARAPET_IMG_STATEFUL_STATISTIC_RANDOM)
		return ((bpf_get_prandom_u32() & 0x7fffffffu) < p0) !=
		       ((kind & PARAPET_IMG_STATEFUL_F_INVERT) != 0);
	b = bpf_map_lookup_elem(&parapet_buckets, &key);
	if (!b)
		return 0;

	if ((kind & 0xff) == PARAPET_IMG_STATEFUL_STATISTIC_NTH) {
		/* A new generation counts from 0; two CPUs resetting at once
		 * may count one packet twice, once. */
		if (b->gen != *genp) {
			b->state = 0;
			b->gen = *genp;
		}
		old = __sync_fetch_and_add(&b->state, 1);
		if (p0 == 0)
			return 0;
		return (old % p0 == p1) !=
		       ((kind & PARAPET_IMG_STATEFUL_F_INVERT) != 0);
	}

	if ((kind & 0xff) == PARAPET_IMG_STATEFUL_QUOTA) {
		/* nft_quota: count the packet's length, then compare with
		 * the quota (lo); a new generation starts at `used` (hi).
		 * Two CPUs resetting at once count from `used` twice at
		 * most once. */
		if (b->gen != *genp) {
			b->state = hi;
			b->gen = *genp;
		}
		old = __sync_add_and_fetch(&b->state, (__u64)k->pkt_len);
		return (old >= lo) == ((kind & PARAPET_IMG_STATEFUL_F_OVER) != 0);
	}
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
