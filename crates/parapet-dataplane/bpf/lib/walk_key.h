/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * walk_key.h - the image key of docs/image-format.md: built from the parsed
 * packet key (build_key) and read field by field (key_value) by the tree
 * descent and the constraint checks of the walker (walk.h).
 */
#ifndef PARAPET_LIB_WALK_KEY_H
#define PARAPET_LIB_WALK_KEY_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "parapet.h"
#include "image.h"
#include "maps.h"
#include "walk_state.h"
#include "ctstate.h"

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
	PARAPET_KW_TCPOPT_LO | PARAPET_KW_WIDE,
	PARAPET_KW_TCPOPT_HI | PARAPET_KW_WIDE,
	PARAPET_KW_REVPATH,
};
_Static_assert(PARAPET_IMG_FIXED_FIELDS == 30, "one table entry per fixed field");
_Static_assert(PARAPET_KW_TCPOPT_HI + 4 <= PARAPET_IMG_KEY_WORDS,
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

/* The image key of docs/image-format.md from the parsed packet key (the
 * interface names: key_ifnames, on first use). */
static __always_inline void build_key(struct parapet_walk *w,
				      const struct parapet_key *key)
{
	int k;

#pragma unroll
	for (k = 0; k < 4; k++) {
		/* word k holds bits 32k..32k+31: bytes 12-4k .. 15-4k, one
		 * aligned load and a byte swap (the struct is 4-aligned and
		 * the addresses start it; be32_at's four byte loads, shifts
		 * and ors were 64 instructions more per packet) */
		w->key[PARAPET_KW_SADDR + k] =
			bpf_ntohl(((const __u32 *)key->src)[3 - k]);
		w->key[PARAPET_KW_DADDR + k] =
			bpf_ntohl(((const __u32 *)key->dst)[3 - k]);
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
	/* the option kinds: 0 here, filled after this by
	 * parapet_tcp_options_fill when the image tests them */
#pragma unroll
	for (k = 0; k < 8; k++)
		w->key[PARAPET_KW_TCPOPT_LO + k] = 0;
	/* the pattern hits: 0 here, set row by row by patterns_fill as
	 * candidates read them (patterns.h) */
#pragma unroll
	for (k = 0; k < 4; k++)
		w->key[PARAPET_KW_PATTERNS + k] = 0;
	/* the route back to the source: the entry looked it up (XDP, tc
	 * ingress: lib/rev_path.h) or left it 0, iif */
	w->key[PARAPET_KW_REVPATH] = w->ext.rev_path;
	w->key[PARAPET_KW_SETS] = 0; /* set_bits() fills these */
	w->key[PARAPET_KW_SETS + 1] = 0;
	w->ifn_done = 0;
}

#endif /* PARAPET_LIB_WALK_KEY_H */
