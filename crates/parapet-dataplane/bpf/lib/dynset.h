/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * dynset.h - nft dynamic sets for stateful.h: nft_dynset.c's add, update
 * and delete (a rule that fills a set as packets pass, optionally with a
 * limit per element) and nft_lookup.c's membership test on such a set.
 * One hash of (set id, family, port, address) -> element (the port of a
 * set of `address . inet_service`, else 0), shared by every row,
 * image and hook naming the set and kept across reloads (as nft keeps a
 * set's elements while the set is declared), and one count of elements
 * per set against the set's size.  The Rust twin is
 * parapet_model::DynsetTables (driven by parapet_compile::ImageState);
 * tests compare the two packet by packet on the test clock.
 *
 * As the kernel: a live element is kept (update moves its expiry); an
 * absent one is added unless the set holds `size` elements (then the rule
 * fails, NFT_BREAK); an expired one is replaced in place; the element's
 * limit is nft_limit's bucket (stateful.h's one-number form), full when
 * the element is made.  Expiry in jiffies (nsecs_to_jiffies64 of the
 * timeout).  Where they differ (docs/syntax.md): PARAPET_DYNSET_MAX
 * elements over all sets (a new element beyond fails the rule, as a full
 * set does); expired elements are dropped when their key is next touched,
 * not by a garbage collector; two CPUs adding one new key at once may
 * count it twice (the count then errs towards refusing early) and two
 * CPUs spending one element's bucket at once retry three times, as
 * stateful.h's limits do.
 */
#ifndef PARAPET_LIB_DYNSET_H
#define PARAPET_LIB_DYNSET_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parapet.h"
#include "image.h"
#include "walk_state.h"
#include "clock.h"

#define PARAPET_DYNSET_MAX 65536
#define PARAPET_DYNSET_SETS 1024

/* The port shares what was a 32-bit family word (image version 10): an
 * element made before, with its port 0, reads the same on little-endian
 * hosts, so a set kept across the upgrade keeps its elements. */
struct parapet_dynset_key {
	__u32 set;     /* FNV-1a of TABLE/SET (parapet_model::DynsetDecl::id) */
	__u16 family;  /* PARAPET_FAMILY_* */
	__u16 port;    /* the key's service (host order), else 0 */
	__u8 addr[16]; /* IPv4 in the last 4 bytes, as in the key */
};

struct parapet_dynset_elem {
	__u64 expires;  /* jiffies; 0: never */
	__u64 empty_at; /* the limit's bucket: ns at which it held nothing */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PARAPET_DYNSET_MAX);
	__type(key, struct parapet_dynset_key);
	__type(value, struct parapet_dynset_elem);
} parapet_dynset SEC(".maps");

/* set id -> elements held (expired ones included until replaced). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PARAPET_DYNSET_SETS);
	__type(key, __u32);
	__type(value, __u64);
} parapet_dynset_count SEC(".maps");

/* The key, a new element and the row's numbers are kept here, not on the
 * stack: stateful_cb (walk_record.h) is on the deepest call chain, at the
 * verifier's 512 bytes, so nothing here may live across a helper call but
 * the scratch and key pointers.  One per scratch slot of the walk, as
 * recent's. */
struct parapet_dynset_scratch {
	struct parapet_dynset_key key;
	struct parapet_dynset_elem elem;
	__u64 now_j, now_ns, cost, max, expiry, zero;
	__u32 kind, set, timeout_ms, size, limit, hz, fresh;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PARAPET_SCRATCH_NF + PARAPET_NF_NEST);
	__type(key, __u32);
	__type(value, struct parapet_dynset_scratch);
} parapet_dynset_scratch SEC(".maps");

/* The numbers 0..7 in global data, as map keys: a key on this file's
 * stack would give dynset_admit a frame (see there). */
const volatile __u32 parapet_dynset_ids[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
_Static_assert(PARAPET_SCRATCH_NF + PARAPET_NF_NEST <= 8,
	       "a scratch slot without an id");

/* The set's element count, made on first use. */
static __always_inline __u64 *dynset_count(struct parapet_dynset_scratch *s)
{
	__u64 *c = bpf_map_lookup_elem(&parapet_dynset_count, &s->set);

	if (c)
		return c;
	s->zero = 0;
	bpf_map_update_elem(&parapet_dynset_count, &s->set, &s->zero,
			    BPF_NOEXIST);
	return bpf_map_lookup_elem(&parapet_dynset_count, &s->set);
}

/* The row's numbers into the scratch: the limit's cost and bucket size,
 * the expiry of a new or refreshed element. */
static __always_inline void dynset_prepare(struct parapet_dynset_scratch *s)
{
	__u64 unit = (s->limit >> PARAPET_IMG_STATEFUL_DYNSET_UNIT_SHIFT) & 3;
	__u32 rate = s->limit & 0xfffff;

	unit = unit == 0 ? 1 : unit == 1 ? 60 : unit == 2 ? 3600 : 86400;
	s->cost = 0;
	s->max = 0;
	if ((s->kind & PARAPET_IMG_STATEFUL_F_DYNSET_LIMIT) && rate) {
		s->cost = unit * 1000000000ull / rate;
		s->max = s->cost *
			 (s->limit >> PARAPET_IMG_STATEFUL_DYNSET_BURST_SHIFT);
	}
	s->expiry = s->now_j + (__u64)s->timeout_ms * 1000000ull /
				       (1000000000ull / s->hz);
}

/* The element's limit for a packet now; 1 when the rule goes on.  Two
 * CPUs spending one bucket: the loser retries, three times at most. */
static __always_inline int dynset_limit(struct parapet_dynset_scratch *s,
					struct parapet_dynset_elem *e)
{
	__u64 old, d, em;
	int tries;

	if (!(s->kind & PARAPET_IMG_STATEFUL_F_DYNSET_LIMIT))
		return 1;
	if (!s->cost)
		return 0;
	s->fresh = 0; /* here: the answer */
	for (tries = 0; tries < 3; tries++) {
		old = e->empty_at;
		d = s->now_ns - old;
		em = d > s->max ? s->now_ns - s->max : old;
		s->fresh = (d > s->max ? s->max : d) >= s->cost;
		if (__sync_val_compare_and_swap(&e->empty_at, old,
						s->fresh ? em + s->cost : em) ==
		    old)
			break;
	}
	return !s->fresh != !(s->kind & PARAPET_IMG_STATEFUL_F_DYNSET_OVER);
}

static __noinline int dynset_run(struct parapet_dynset_scratch *s);

/*
 * A dynset row (kind | flags; lo = p0 set | p1 timeout ms << 32; hi = p2
 * size | p3 limit << 32) for the packet `k` walked in scratch slot
 * `nest`.  1 when the rule goes on; 0 also when HZ is unknown (element
 * timeouts are in jiffies).  Two functions, not inlined, each with no
 * stack of its own: inlined, this grew stateful_cb's frame (walk_record.h),
 * which is on the walk's deepest call chain, at the verifier's 512 bytes
 * (check with llvm-objdump: no `r10 -` in either).  This one moves the
 * row and the key into the scratch slot, dynset_run does the rest.
 */
static __noinline int dynset_admit(__u32 kind, __u64 lo, __u64 hi,
				   const struct parapet_key *k, __u32 nest)
{
	/* No early return: one exit, so no register is held for it. A slot
	 * past the array finds nothing. */
	struct parapet_dynset_scratch *s = bpf_map_lookup_elem(
		&parapet_dynset_scratch,
		(const void *)&parapet_dynset_ids[nest & 7]);

	if (s) {
		s->kind = kind;
		s->set = (__u32)lo;
		s->timeout_ms = (__u32)(lo >> 32);
		s->size = (__u32)hi;
		s->limit = (__u32)(hi >> 32);
		s->key.set = (__u32)lo;
		s->key.family = k->family;
		s->key.port = 0;
		switch ((kind >> PARAPET_IMG_STATEFUL_DYNSET_PORT_SHIFT) & 3) {
		case 1:
			s->key.port = k->sport;
			break;
		case 2:
			s->key.port = k->dport;
			break;
		case 3:
			s->key.port =
				kind >> PARAPET_IMG_STATEFUL_DYNSET_PORT_CONST_SHIFT;
			break;
		}
		if (kind & PARAPET_IMG_STATEFUL_F_RDEST)
			__builtin_memcpy(s->key.addr, k->dst, 16);
		else
			__builtin_memcpy(s->key.addr, k->src, 16);
	}
	return dynset_run(s);
}

static __noinline int dynset_run(struct parapet_dynset_scratch *s)
{
	struct parapet_dynset_elem *e;
	__u64 *c;

	if (!s)
		return 0;
	s->hz = parapet_hz;
	if (s->hz == 0 || s->hz > 100000)
		return 0;
	c = bpf_map_lookup_elem(&parapet_test_clock,
				(const void *)&parapet_dynset_ids[0]);
	s->now_ns = c ? *c : 0;
	if (!s->now_ns) {
		s->now_j = bpf_jiffies64();
		s->now_ns = bpf_ktime_get_ns();
	} else {
		s->now_j = s->now_ns / (1000000000ull / s->hz);
	}
	dynset_prepare(s);
	e = bpf_map_lookup_elem(&parapet_dynset, &s->key);
	s->fresh = !e;
	if (e && e->expires && s->now_j >= e->expires)
		e = 0; /* expired: as absent, replaced in place */
	switch ((s->kind >> PARAPET_IMG_STATEFUL_DYNSET_OP_SHIFT) & 3) {
	case 3: /* lookup */
		return !e != !(s->kind & PARAPET_IMG_STATEFUL_F_INVERT);
	case 2: /* delete */
		if (!s->fresh &&
		    bpf_map_delete_elem(&parapet_dynset, &s->key) == 0) {
			c = dynset_count(s);
			if (c)
				__sync_fetch_and_add(c, -1);
		}
		return 1;
	}
	if (e) {
		/* update: priv->timeout ?: set->timeout, even 0 */
		if ((s->kind & (3 << PARAPET_IMG_STATEFUL_DYNSET_OP_SHIFT)) ==
			    (1 << PARAPET_IMG_STATEFUL_DYNSET_OP_SHIFT) &&
		    e->expires)
			e->expires = s->expiry;
		return dynset_limit(s, e);
	}
	if (s->fresh) {
		c = dynset_count(s);
		if (!c || *c >= s->size)
			return 0; /* the set is full: NFT_BREAK */
		__sync_fetch_and_add(c, 1);
	}
	s->elem.expires = s->timeout_ms ? s->expiry : 0;
	s->elem.empty_at = s->now_ns - s->max;
	if (bpf_map_update_elem(&parapet_dynset, &s->key, &s->elem, BPF_ANY)) {
		c = s->fresh ? dynset_count(s) : 0;
		if (c)
			__sync_fetch_and_add(c, -1);
		return 0;
	}
	e = bpf_map_lookup_elem(&parapet_dynset, &s->key);
	return e ? dynset_limit(s, e) : 0;
}

#endif /* PARAPET_LIB_DYNSET_H */
