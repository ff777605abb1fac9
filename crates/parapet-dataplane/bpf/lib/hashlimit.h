/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * hashlimit.h - iptables -m hashlimit (xt_hashlimit.c, revisions 2 and 3,
 * packet mode) for stateful.h: one LRU hash of (table id, family, masked
 * addresses, ports as --hashlimit-mode chooses) -> a bucket of u64 credits,
 * shared by every row, image and hook naming the table, kept across
 * reloads (as the kernel keeps a table while a rule names it).  The Rust
 * twin is parapet_model::hashlimit_step (driven by
 * parapet_compile::ImageState); tests compare the two packet by packet.
 *
 * The arithmetic is the kernel's: CREDITS_PER_JIFFY is the largest power
 * of two <= U64_MAX / (HZ * 86400); credits are avg * (HZ * cpj / 1e6);
 * a new entry starts full (avg * burst) and a known one gains
 * (now - prev) * cpj credits, capped.  An entry idle for --hashlimit-htable-
 * expire ms is replaced by a full one (the kernel's garbage collector
 * removes it within --hashlimit-htable-gcinterval after).
 * Where they differ (docs/syntax.md): PARAPET_HASHLIMIT_MAX entries over
 * all tables with the LRU hash's eviction instead of --hashlimit-htable-max
 * per table (at which the kernel drops new keys' packets); two CPUs
 * updating one key at once may both spend from the same credit.
 */
#ifndef PARAPET_LIB_HASHLIMIT_H
#define PARAPET_LIB_HASHLIMIT_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "parapet.h"
#include "image.h"
#include "walk_state.h"

#define PARAPET_HASHLIMIT_MAX 65536

struct parapet_hashlimit_key {
	__u32 table;   /* FNV-1a of the name (parapet_model::table_id) */
	__u32 family;  /* PARAPET_FAMILY_* */
	__u8 src[16];  /* masked, or zero when the mode leaves it out */
	__u8 dst[16];
	__u16 sport;   /* host order, or zero */
	__u16 dport;
};

struct parapet_hashlimit_entry {
	__u64 prev;    /* jiffies of the last packet */
	__u64 credit;
	__u64 expires; /* jiffies */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PARAPET_HASHLIMIT_MAX);
	__type(key, struct parapet_hashlimit_key);
	__type(value, struct parapet_hashlimit_entry);
} parapet_hashlimit SEC(".maps");

/* The key and a new entry are built here, not on the stack (the walk's
 * call chain is near the verifier's 512 bytes); one per scratch slot of
 * the walk, as recent's. */
struct parapet_hashlimit_scratch {
	struct parapet_hashlimit_key key;
	struct parapet_hashlimit_entry entry;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PARAPET_SCRATCH_NF + PARAPET_NF_NEST);
	__type(key, __u32);
	__type(value, struct parapet_hashlimit_scratch);
} parapet_hashlimit_scratch SEC(".maps");

/* CREDITS_PER_JIFFY of revision >= 2. */
static __always_inline __u64 hashlimit_cpj(__u32 hz)
{
	__u64 x = ~0ull / ((__u64)hz * 86400ull);

	x |= x >> 1;
	x |= x >> 2;
	x |= x >> 4;
	x |= x >> 8;
	x |= x >> 16;
	x |= x >> 32;
	return (x >> 1) + 1;
}

/* Keeps the first `prefix` bits of a 16-byte key address (IPv4 in the
 * last 4 bytes, network order). */
static __always_inline void hashlimit_mask(__u8 *addr, __u32 prefix,
					   __u32 family)
{
	__u64 hi = ~0ull, lo = ~0ull, *a = (__u64 *)addr;

	if (family == PARAPET_FAMILY_IPV4) {
		__u32 m = prefix >= 32 ? ~0u : prefix ? ~0u << (32 - prefix) : 0;

		lo = 0xffffffff00000000ull | m;
	} else {
		if (prefix < 64)
			hi = prefix ? ~0ull << (64 - prefix) : 0;
		if (prefix < 128)
			lo = prefix > 64 ? ~0ull << (128 - prefix) : 0;
	}
	a[0] &= bpf_cpu_to_be64(hi);
	a[1] &= bpf_cpu_to_be64(lo);
}

/*
 * hashlimit_mt for a hashlimit row (kind | mode << 8 | above | srcmask <<
 * 16 | dstmask << 24, p0 table, p1 avg's low word, p2 avg's high byte |
 * burst << 8, p3 expire ms) and the packet `k`, at jiffy `now`.  1 when
 * the match answers yes.
 */
static __always_inline int hashlimit_admit(__u32 kind, __u32 table,
					   __u32 avg_lo, __u32 p2,
					   __u32 expire_ms, __u64 now,
					   __u32 hz,
					   const struct parapet_key *k,
					   __u32 nest)
{
	__u32 mode = (kind >> PARAPET_IMG_STATEFUL_HASHLIMIT_MODE_SHIFT) & 0xf;
	__u64 avg = (__u64)avg_lo | (__u64)(p2 & 0xff) << 32;
	__u64 burst = p2 >> PARAPET_IMG_STATEFUL_HASHLIMIT_BURST_SHIFT;
	__u64 cpj = hashlimit_cpj(hz);
	__u64 factor = (__u64)hz * cpj / 1000000ull;
	__u64 cost = avg * factor, cap = avg * burst * factor;
	__u64 life = ((__u64)expire_ms * hz + 999) / 1000;
	int above = (kind & PARAPET_IMG_STATEFUL_F_ABOVE) != 0, under;
	struct parapet_hashlimit_scratch *s;
	struct parapet_hashlimit_entry *e;

	s = bpf_map_lookup_elem(&parapet_hashlimit_scratch, &nest);
	if (!s)
		return 0;
	__builtin_memset(&s->key, 0, sizeof(s->key));
	s->key.table = table;
	s->key.family = k->family;
	if (mode & PARAPET_HASHLIMIT_HASH_SIP) {
		__builtin_memcpy(s->key.src, k->src, 16);
		hashlimit_mask(s->key.src,
			       (kind >> PARAPET_IMG_STATEFUL_HASHLIMIT_SRCMASK_SHIFT) &
				       0xff,
			       k->family);
	}
	if (mode & PARAPET_HASHLIMIT_HASH_DIP) {
		__builtin_memcpy(s->key.dst, k->dst, 16);
		hashlimit_mask(s->key.dst,
			       (kind >> PARAPET_IMG_STATEFUL_HASHLIMIT_DSTMASK_SHIFT) &
				       0xff,
			       k->family);
	}
	if (mode & PARAPET_HASHLIMIT_HASH_SPT)
		s->key.sport = k->sport;
	if (mode & PARAPET_HASHLIMIT_HASH_DPT)
		s->key.dport = k->dport;
	e = bpf_map_lookup_elem(&parapet_hashlimit, &s->key);
	if (e && (__s64)(now - e->expires) < 0) {
		__u64 delta = now - e->prev, credit = e->credit;

		e->expires = now + life;
		if (delta) {
			e->prev = now;
			credit += delta * cpj;
			if (credit > cap)
				credit = cap;
		}
		under = credit >= cost;
		e->credit = under ? credit - cost : credit;
		return under != above;
	}
	s->entry.prev = now;
	s->entry.expires = now + life;
	under = cap >= cost;
	s->entry.credit = under ? cap - cost : cap;
	/* A failed insert answers as a new entry would: the LRU hash evicts
	 * rather than fails. */
	bpf_map_update_elem(&parapet_hashlimit, &s->key, &s->entry, BPF_ANY);
	return under != above;
}

#endif /* PARAPET_LIB_HASHLIMIT_H */
