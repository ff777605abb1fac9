/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * addr_type.h - the address types of a packet (key words 34 and 35) as
 * -m addrtype and nft's fib ... type read them: the kernel's route type of
 * the address (RTN_*), from inet_addr_type (IPv4: a lookup in the `local`
 * routing table) and, for IPv6, the address class and a route lookup
 * (docs/hooks.md, "Address and packet types").
 *
 * The host state, which addresses are the host's own (RTN_LOCAL) and which
 * are its subnets' broadcast addresses (RTN_BROADCAST), is parapetd's
 * mirror of the `local` table's local and broadcast routes
 * (parapet_addr_types; Dataplane::set_addr_types).  An LPM trie, not a hash
 * of addresses: the table holds prefixes (127.0.0.0/8, AnyIP routes such as
 * `local 10.9.0.0/24 dev lo`) and the kernel answers with the longest one,
 * which one trie lookup per address reproduces.
 *
 * Typed only when the image's header has PARAPET_IMG_FLAG_ADDR_TYPES (some
 * rule reads the types): other images cost one flag test.
 */
#ifndef PARAPET_LIB_ADDR_TYPE_H
#define PARAPET_LIB_ADDR_TYPE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parapet.h"
#include "image.h"
#include "walk_state.h"

/* The kernel's RTN_* numbers the program produces. */
#define PARAPET_RTN_UNSPEC 0
#define PARAPET_RTN_UNICAST 1
#define PARAPET_RTN_LOCAL 2
#define PARAPET_RTN_BROADCAST 3
#define PARAPET_RTN_MULTICAST 5

/* Most routes the mirror holds (addresses and broadcast addresses of every
 * interface of the namespace; parapetd refuses to mirror more). */
#define PARAPET_ADDR_TYPE_ENTRIES 4096

/* The trie's key: prefixlen counts the 32 bits of family and pad, then the
 * address's prefix.  Written by src/addr_types.rs as 20 raw bytes. */
struct parapet_addr_type_key {
	__u32 prefixlen;
	__u8 family; /* PARAPET_FAMILY_IPV4 / _IPV6 */
	__u8 _pad[3];
	__u8 addr[16]; /* big-endian; IPv4 in the first 4 bytes */
};

/* value: the route's RTN_* type (LOCAL or BROADCAST) */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, PARAPET_ADDR_TYPE_ENTRIES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct parapet_addr_type_key);
	__type(value, __u32);
} parapet_addr_types SEC(".maps");

/* The type of the address in key words w->key[at .. at + 3] (word 0 the
 * low 32 bits) of a packet of `family`. */
static __always_inline __u32 addr_type_of(struct parapet_walk *w, __u32 family,
					  __u32 at)
{
	struct parapet_addr_type_key k = {};
	__u32 lo, *t;
	int i;

	if (at > PARAPET_IMG_KEY_WORDS - 4)
		return PARAPET_RTN_UNSPEC;
	lo = w->key[at];
	k.family = family;
	if (family == PARAPET_FAMILY_IPV4) {
		/* inet_addr_type: zeronet and the limited broadcast before
		 * any table, then multicast */
		if ((lo >> 24) == 0 || lo == 0xffffffffu)
			return PARAPET_RTN_BROADCAST;
		if ((lo >> 28) == 0xe)
			return PARAPET_RTN_MULTICAST;
		k.prefixlen = 32 + 32;
		k.addr[0] = lo >> 24;
		k.addr[1] = lo >> 16;
		k.addr[2] = lo >> 8;
		k.addr[3] = lo;
	} else if (family == PARAPET_FAMILY_IPV6) {
		__u32 hi = w->key[at + 3];

		if ((w->key[at] | w->key[at + 1] | w->key[at + 2] | hi) == 0)
			return PARAPET_RTN_UNSPEC; /* :: (IPV6_ADDR_ANY) */
		if ((hi >> 24) == 0xff)
			return PARAPET_RTN_MULTICAST;
		k.prefixlen = 32 + 128;
#pragma unroll
		for (i = 0; i < 4; i++) {
			__u32 v = w->key[at + 3 - i];

			k.addr[4 * i] = v >> 24;
			k.addr[4 * i + 1] = v >> 16;
			k.addr[4 * i + 2] = v >> 8;
			k.addr[4 * i + 3] = v;
		}
	} else {
		return PARAPET_RTN_UNSPEC;
	}
	t = bpf_map_lookup_elem(&parapet_addr_types, &k);
	if (t)
		return *t;
	/* no mirror (a test's program, a namespace without lo up): the
	 * loopback routes the kernel always has once lo is up */
	if (family == PARAPET_FAMILY_IPV4 && (lo >> 24) == 127)
		return PARAPET_RTN_LOCAL;
	if (family == PARAPET_FAMILY_IPV6 && lo == 1 &&
	    (w->key[at + 1] | w->key[at + 2] | w->key[at + 3]) == 0)
		return PARAPET_RTN_LOCAL;
	return PARAPET_RTN_UNICAST;
}

/*
 * Key words 34 and 35 from the addresses already in the key.  Global: the
 * verifier checks it once, not at every call site in every program, and
 * its frame (the trie key) is off the walker's deepest call chain.
 */
__noinline long parapet_addr_types_fill(struct parapet_walk *w)
{
	__u32 family;

	if (!w)
		return 0;
	family = w->key[PARAPET_KW_FAMILY];
	w->key[PARAPET_KW_STYPE] = addr_type_of(w, family, PARAPET_KW_SADDR);
	w->key[PARAPET_KW_DTYPE] = addr_type_of(w, family, PARAPET_KW_DADDR);
	return 0;
}

#endif /* PARAPET_LIB_ADDR_TYPE_H */
