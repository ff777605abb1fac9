/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * sets.h - set membership for the image key (words 24..25), filled in by
 * image_walk() (walk.h).  Bit n of the key is "the packet's key for set
 * reference n is a live element of the reference's set" (docs/dataplane.md,
 * "Sets").
 *
 * Reference n of the image in slot s is described by parapet_set_refs[s * 64
 * + n]: which set, which packet part per key dimension, the family.  The
 * elements of a set live in one of two maps (maps.h) shared by every set:
 *
 * - parapet_set_exact4 / parapet_set_exact6, hashes, for the single
 *   addresses (/32, /128 entries) of address sets: looked up first.
 * - parapet_set_lpm, an LPM trie, for sets of one dimension (address,
 *   port, protocol or interface name): the key is (set id, value); ranges
 *   were split into prefixes by user space (single addresses too once the
 *   exact hash is full).  The longest matching prefix may have expired while a shorter
 *   one is live, so an expired hit retries with a prefixlen one shorter
 *   than the hit's (bounded by the 129 possible lengths).
 * - parapet_set_tuple, a hash, for everything else: the concatenated key,
 *   masked by each of the set's shapes (the per-dimension prefix lengths
 *   its elements were split into), is looked up once per shape.
 *
 * The value is an expiry in CLOCK_MONOTONIC ns (0 = permanent), so an
 * expired element never matches, whether or not user space has reaped it.
 */
#ifndef PARAPET_LIB_SETS_H
#define PARAPET_LIB_SETS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parapet.h"
#include "image.h"
#include "maps.h"
#include "walk_state.h"

#define PARAPET_SET_LPM_TRIES 130

static __always_inline int set_val_live(const struct parapet_set_val *v,
					__u64 now)
{
	return v->expires_ns == 0 || v->expires_ns > now;
}

/*
 * The 16 big-endian bytes of packet part `part`, right-aligned (an IPv4
 * address, a port or a protocol sits in the last bytes), into w->sval.
 */
static __always_inline void set_part_value(struct parapet_walk *w, __u32 part)
{
	int k;

#pragma unroll
	for (k = 0; k < 16; k++)
		w->sval[k] = 0;
	switch (part) {
	case PARAPET_PART_SADDR:
		__builtin_memcpy(w->sval, w->pkey.src, 16);
		break;
	case PARAPET_PART_DADDR:
		__builtin_memcpy(w->sval, w->pkey.dst, 16);
		break;
	case PARAPET_PART_SPORT:
		w->sval[14] = w->pkey.sport >> 8;
		w->sval[15] = w->pkey.sport & 0xff;
		break;
	case PARAPET_PART_DPORT:
		w->sval[14] = w->pkey.dport >> 8;
		w->sval[15] = w->pkey.dport & 0xff;
		break;
	case PARAPET_PART_PROTO:
		w->sval[15] = w->pkey.proto;
		break;
	case PARAPET_PART_IIF:
		/* the image key's iif words (set_bits looked them up): word
		 * 3 - k holds bytes 4k..4k+3 */
#pragma unroll
		for (k = 0; k < 4; k++) {
			__u32 x = w->key[PARAPET_KW_IIF + 3 - k];

			w->sval[4 * k] = x >> 24;
			w->sval[4 * k + 1] = x >> 16;
			w->sval[4 * k + 2] = x >> 8;
			w->sval[4 * k + 3] = x;
		}
		break;
	default: /* OIF: none at ingress */
		break;
	}
}

/*
 * Loops are bpf_loop callbacks with their state in the walk's scratch
 * value (see walk.h): the verifier checks each body once.
 */

/* Append dimension d of the reference w->sref to the key bytes; 0 when
 * the dimension does not fit the key. */
static __always_inline int set_dim(struct parapet_walk *w, __u32 d)
{
	__u32 width, off, part;
	int j;

	width = w->sref.width[d & (PARAPET_SET_MAX_DIMS - 1)];
	part = w->sref.part[d & (PARAPET_SET_MAX_DIMS - 1)];
	off = w->soff;
	if (width > 16 || off + width > PARAPET_SET_KEY_BYTES)
		return 0;
	set_part_value(w, part);
#pragma unroll
	for (j = 0; j < 16; j++) {
		if (j < width)
			w->sbytes[(off + j) & 63] = w->sval[(16 - width + j) & 15];
	}
	w->soff = off + width;
	return 1;
}

/* One LPM lookup; an expired hit retries below the hit's length. */
static long set_lpm_cb(__u32 t, void *ctx)
{
	struct parapet_walk *w = walk_state(ctx);
	struct parapet_set_val *v;

	if (!w)
		return 1;
	v = bpf_map_lookup_elem(&parapet_set_lpm, &w->lkey);
	if (!v)
		return 1;
	if (set_val_live(v, w->now)) {
		w->smember = 1;
		return 1;
	}
	/* expired: a shorter (enclosing) prefix may be live */
	if (v->prefixlen <= 16 || v->prefixlen > w->lkey.prefixlen)
		return 1;
	w->lkey.prefixlen = v->prefixlen - 1;
	return 0;
}

/* Probe shape s of the tuple set w->sref.set_id. */
static long set_shape_cb(__u32 s, void *ctx)
{
	struct parapet_walk *w = walk_state(ctx);
	struct parapet_set_desc *desc;
	struct parapet_set_val *v;
	__u32 sid, k;

	if (!w)
		return 1;
	sid = w->sref.set_id;
	desc = bpf_map_lookup_elem(&parapet_set_descs, &sid);
	if (!desc || s >= PARAPET_SET_MAX_SHAPES)
		return 1;
	w->tkey.shape = s;
#pragma unroll
	for (k = 0; k < PARAPET_SET_KEY_WORDS; k++)
		w->tkey.data[k] = w->sword[k] & desc->mask[s][k];
	v = bpf_map_lookup_elem(&parapet_set_tuple, &w->tkey);
	if (v && set_val_live(v, w->now)) {
		w->smember = 1;
		return 1;
	}
	return 0;
}

/* Membership of the packet for reference i of the walk's slot. */
static long set_ref_cb(__u32 i, void *ctx)
{
	struct parapet_walk *w = walk_state(ctx);
	struct parapet_set_ref *r;
	__u32 ri, t;

	if (!w)
		return 1;
	ri = (w->slot & 1) * PARAPET_MAX_SET_REFS + (i & (PARAPET_MAX_SET_REFS - 1));
	r = bpf_map_lookup_elem(&parapet_set_refs, &ri);
	if (!r || r->kind == PARAPET_SET_NONE)
		return 0;
	if (r->family && r->family != w->pkey.family)
		return 0;
	w->smember = 0;

	/* Fast path, the usual ban list: one address in the LPM trie, one
	 * lookup without building the key byte by byte. */
	if (r->kind == PARAPET_SET_LPM && r->n_dims == 1 &&
	    (r->part[0] == PARAPET_PART_SADDR ||
	     r->part[0] == PARAPET_PART_DADDR) &&
	    (r->width[0] == 4 || r->width[0] == 16)) {
		const __u8 *a = r->part[0] == PARAPET_PART_SADDR ? w->pkey.src :
								     w->pkey.dst;
		struct parapet_set_val *v;
		__u64 *e;

		/* Single addresses first, in a hash (user space puts /32 and
		 * /128 entries there while it has room, set_mirror.rs): a live
		 * one is the answer; otherwise the trie's entries decide. The
		 * key is built in the walk's scratch bytes. */
		if (r->width[0] == 4) {
			struct parapet_set_exact4_key *k4 = (void *)w->sbytes;

			k4->set_id = r->set_id;
			k4->_pad = 0;
			__builtin_memcpy(k4->addr, a + 12, 4);
			e = bpf_map_lookup_elem(&parapet_set_exact4, k4);
		} else {
			struct parapet_set_exact6_key *k6 = (void *)w->sbytes;

			k6->set_id = r->set_id;
			k6->_pad = 0;
			__builtin_memcpy(k6->addr, a, 16);
			e = bpf_map_lookup_elem(&parapet_set_exact6, k6);
		}
		if (e && (*e == 0 || *e > w->now)) {
			w->smember = 1;
			goto out;
		}

		w->lkey.set_id[0] = r->set_id >> 8;
		w->lkey.set_id[1] = r->set_id & 0xff;
		if (r->width[0] == 4) {
			w->lkey.prefixlen = 16 + 32;
			__builtin_memcpy(w->lkey.addr, a + 12, 4);
		} else {
			w->lkey.prefixlen = 16 + 128;
			__builtin_memcpy(w->lkey.addr, a, 16);
		}
		v = bpf_map_lookup_elem(&parapet_set_lpm, &w->lkey);
		if (!v)
			return 0;
		if (set_val_live(v, w->now)) {
			w->smember = 1;
		} else if (v->prefixlen > 16 && v->prefixlen <= w->lkey.prefixlen) {
			/* expired: shorter enclosing prefixes may be live */
			w->lkey.prefixlen = v->prefixlen - 1;
			bpf_loop(PARAPET_SET_LPM_TRIES, set_lpm_cb, ctx, 0);
		}
		goto out;
	}

	__builtin_memcpy(&w->sref, r, sizeof(*r));
	w->soff = 0;
	if (w->sref.n_dims > PARAPET_SET_MAX_DIMS)
		return 0;

	/* The concatenated key, big-endian, dimensions back to back. */
#pragma unroll
	for (t = 0; t < PARAPET_SET_MAX_DIMS; t++) {
		if (t >= w->sref.n_dims)
			break;
		if (!set_dim(w, t))
			return 0;
	}

	if (w->sref.kind == PARAPET_SET_LPM) {
		if (w->sref.n_dims != 1 || w->soff > 16)
			return 0;
		w->lkey.prefixlen = 16 + 8 * w->soff;
		w->lkey.set_id[0] = w->sref.set_id >> 8;
		w->lkey.set_id[1] = w->sref.set_id & 0xff;
#pragma unroll
		for (t = 0; t < 16; t++)
			w->lkey.addr[t] = w->sbytes[t];
		bpf_loop(PARAPET_SET_LPM_TRIES, set_lpm_cb, ctx, 0);
	} else if (w->sref.kind == PARAPET_SET_TUPLE) {
		__u32 sid = w->sref.set_id;
		struct parapet_set_desc *desc =
			bpf_map_lookup_elem(&parapet_set_descs, &sid);

		if (!desc)
			return 0;
		w->tkey.set_id = sid;
		w->tkey._pad = 0;
		bpf_loop(desc->n_shapes, set_shape_cb, ctx, 0);
	}
out:
	w = walk_state(ctx);
	if (w && w->smember)
		w->key[PARAPET_KW_SETS + ((i >> 5) & 1)] |= 1u << (i & 31);
	return 0;
}

/* Fill the key's set bits for the `n` references the image uses. */
static __always_inline void set_bits(struct parapet_walk *w, void *ctx,
				     __u32 n)
{
	if (n > PARAPET_MAX_SET_REFS)
		n = PARAPET_MAX_SET_REFS;
	if (!n)
		return;
	/* an interface set reads the key's name words: once, here, and not
	 * inside the reference loop (its verifier budget is tight) */
	key_ifnames(w);
	w->now = bpf_ktime_get_ns();
	bpf_loop(n, set_ref_cb, ctx, 0);
}

#endif /* PARAPET_LIB_SETS_H */
