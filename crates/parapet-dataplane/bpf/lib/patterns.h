/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * patterns.h - -m string in the dataplane: the pattern hits (key words
 * 52..55, field 30; parapet_image::patterns), bit i = pattern row i lies
 * wholly inside bytes [from, min(to, length)) of the datagram from its IP
 * header, as xt_string's skb_find_text finds it (offsets from the
 * network header, the kernel's toupper under --icase).
 *
 * Two halves, as for the TCP options (tcp_options.h), so that only
 * rulesets that search pay:
 * - the entry copies the datagram's first PARAPET_DGRAM_MAX bytes into
 *   the walk state while parapet_config[PARAPET_CFG_PATTERNS] is on
 *   (installs set it before an image with patterns goes live): one helper
 *   call (XDP: bpf_xdp_load_bytes; tc: bpf_skb_load_bytes; netfilter:
 *   bpf_dynptr_read from the skb, paged data included).
 * - the walker searches a row only when a candidate entry's constraint
 *   reads its bit (walk_record.h), i.e. only for rules still candidates
 *   after the tree walk whose earlier constraints matched, and each row
 *   once per packet (pat_done).  The search is Knuth-Morris-Pratt over
 *   the row's prefix table, which the image carries: at most
 *   2 * (end - from) steps whatever the packet holds.
 *
 * Never a guess: an image with patterns whose datagram the entry did not
 * copy (the switch off) abandons the walk (error 21); so does a search
 * that would read past the copied bytes (a datagram longer than
 * PARAPET_DGRAM_MAX with a --to past it: error 22), and a malformed row
 * (error 23).
 */
#ifndef PARAPET_LIB_PATTERNS_H
#define PARAPET_LIB_PATTERNS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parapet.h"
#include "image.h"
#include "maps.h"
#include "parse.h"
#include "walk_state.h"
#include "image_read.h"

/* ext.dgram_copied's flag: the entry copied (the count is below it). */
#define PARAPET_DGRAM_COPIED 0x80000000u

/* The pattern switch (PARAPET_CFG_PATTERNS), one inlined array load. */
static __always_inline int patterns_on(void)
{
	__u32 k = PARAPET_CFG_PATTERNS;
	__u32 *v = bpf_map_lookup_elem(&parapet_config, &k);

	return v && *v;
}

/*
 * The walk state to copy into, with ext.dgram_len set and the byte count
 * to copy in *n (1..PARAPET_DGRAM_MAX), or NULL when there is nothing to
 * copy (the switch off, a packet not parsed).  `avail`: the bytes the
 * packet holds from its IP header on.
 */
static __always_inline struct parapet_walk *
patterns_target(__u32 idx, const struct parapet_key *key, __u32 avail,
		int status, __u32 *n)
{
	struct walk_cb_ctx wc = { .idx = idx };
	struct parapet_walk *w;
	__u32 dlen, c;

	if (status != PARAPET_PARSE_OK || !patterns_on())
		return 0;
	w = walk_state(&wc);
	if (!w)
		return 0;
	/* the L3 length, as the kernel trims the skb to it before netfilter
	 * (Ethernet padding is not searched) */
	dlen = key->pkt_len < avail ? key->pkt_len : avail;
	w->ext.dgram_len = dlen;
	c = dlen < PARAPET_DGRAM_MAX ? dlen : PARAPET_DGRAM_MAX;
	if (c == 0) {
		w->ext.dgram_copied = PARAPET_DGRAM_COPIED;
		return 0;
	}
	*n = c;
	return w;
}

/* The XDP entry's copy (scratch slot 0). */
static __always_inline void xdp_patterns(struct xdp_md *ctx,
					 const struct parapet_key *key,
					 const struct parapet_offs *offs,
					 __u32 frame_len, int status)
{
	__u32 n = 0, l3 = offs->l3;
	struct parapet_walk *w = patterns_target(
		0, key, frame_len > l3 ? frame_len - l3 : 0, status, &n);

	if (w && n >= 1 && n <= PARAPET_DGRAM_MAX &&
	    !bpf_xdp_load_bytes(ctx, l3, w->dgram, n))
		w->ext.dgram_copied = PARAPET_DGRAM_COPIED | n;
}

/* A tc entry's copy (scratch slot 1); frame_len is skb->len. */
static __always_inline void tc_patterns(struct __sk_buff *skb,
					const struct parapet_key *key,
					const struct parapet_offs *offs,
					int status)
{
	__u32 n = 0, l3 = offs->l3, len = skb->len;
	struct parapet_walk *w =
		patterns_target(1, key, len > l3 ? len - l3 : 0, status, &n);

	if (w && n >= 1 && n <= PARAPET_DGRAM_MAX &&
	    !bpf_skb_load_bytes(skb, l3, w->dgram, n))
		w->ext.dgram_copied = PARAPET_DGRAM_COPIED | n;
}

/* The netfilter entry's copy into scratch slot idx: the skb's data starts
 * at the IP header there (`len` bytes). */
static __always_inline void nf_patterns(__u32 idx, struct bpf_dynptr *ptr,
					const struct parapet_key *key,
					__u32 len, int status)
{
	__u32 n = 0;
	struct parapet_walk *w = patterns_target(idx, key, len, status, &n);

	if (w && n >= 1 && n <= PARAPET_DGRAM_MAX &&
	    !bpf_dynptr_read(w->dgram, n, ptr, 0, 0))
		w->ext.dgram_copied = PARAPET_DGRAM_COPIED | n;
}

/* The kernel's toupper (lib/ctype.c): ASCII and Latin-1 lower case. */
static __always_inline __u32 kernel_toupper(__u32 c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 0xdf && c != 0xf7))
		return c - 0x20;
	return c;
}

/* The walk's start for an image with patterns: none searched yet; an
 * image whose datagram the entry did not copy is abandoned (error 21). */
static __always_inline int patterns_begin(struct parapet_walk *w)
{
	int k;

#pragma unroll
	for (k = 0; k < 4; k++)
		w->pat_done[k] = 0;
	return (w->ext.dgram_copied & PARAPET_DGRAM_COPIED) ? 0 : -1;
}

/* Row w->pat_row's pattern and prefix table into the walk state, its
 * search bounds into pat_i/pat_end; returns 1 when the row cannot be found
 * in this datagram (no search needed), 0 to search, -1 on an error. */
static __always_inline int pattern_load(struct parapet_walk *w)
{
	__u32 at, data, lw, len, from, to, end, copied, k;

	at = rd(w, PARAPET_HW_PATTERNS_OFF) +
	     w->pat_row * PARAPET_IMG_PATTERN_ROW_WORDS;
	data = rd(w, at);
	lw = rd(w, at + 1);
	from = rd(w, at + 2);
	to = rd(w, at + 3);
	len = lw & 0xff;
	if (w->err || len == 0 || len > PARAPET_IMG_PATTERN_MAX_LEN) {
		w->err = 23;
		return -1;
	}
	w->pat_len = len;
	w->pat_icase = lw & PARAPET_IMG_PATTERN_F_ICASE;
	end = to < w->ext.dgram_len ? to : w->ext.dgram_len;
	if (from >= end || end - from < len)
		return 1;
	copied = w->ext.dgram_copied & ~PARAPET_DGRAM_COPIED;
	if (end > copied || copied > PARAPET_DGRAM_MAX) {
		w->err = 22;
		return -1;
	}
	w->pat_i = from;
	w->pat_j = 0;
	w->pat_end = end;
	/* the pattern's words, then the prefix table's */
	w->pat_at = data;
	w->pat_words = (len + 3) / 4;
	walk_for(k, 2 * (PARAPET_IMG_PATTERN_MAX_LEN / 4)) {
		__u32 x, word = k;

		if (word >= 2 * w->pat_words)
			break;
		x = rd(w, w->pat_at + word);
		if (w->err)
			return -1;
		if (word < w->pat_words)
			*(__u32 *)&w->pat[(4 * word) & (PARAPET_IMG_PATTERN_MAX_LEN - 4)] = x;
		else
			*(__u32 *)&w->pat_fail[(4 * (word - w->pat_words)) &
					       (PARAPET_IMG_PATTERN_MAX_LEN - 4)] = x;
	}
	return 0;
}

/* Whether a byte of the 8 in v is zero (the classic bit trick). */
static __always_inline __u64 has_zero_byte(__u64 v)
{
	return (v - 0x0101010101010101ull) & ~v & 0x8080808080808080ull;
}

/*
 * The Knuth-Morris-Pratt search of the loaded row over dgram[pat_i ..
 * pat_end): 1 found, 0 not, -1 an error.  Each step moves i on or j back,
 * and j moves on only with i: at most 2 * (end - from) steps.  While no
 * prefix is matched (j = 0) a step skips 8 bytes none of which can start
 * the pattern (the pattern's first byte, or under --icase the one byte
 * that folds to it, 0x20 above: a superset is enough to skip safely).
 * A may_goto loop (walk_state.h), its step count in the map value.
 */
static __always_inline int pattern_search(struct parapet_walk *w)
{
	__u32 i, j, c, p, nj;
	__u64 first, other, v;
	budget_loop_var(n);

	first = w->pat[0] * 0x0101010101010101ull;
	other = w->pat_icase ? (__u64)((w->pat[0] + 0x20) & 0xff) *
				       0x0101010101010101ull :
			       first;
	*(volatile __u32 *)&w->pat_steps = 0;
	budget_loop(n, 2 * PARAPET_DGRAM_MAX + 2) {
		if (loop_budget_spent() ||
		    (*(volatile __u32 *)&w->pat_steps)++ > 2 * PARAPET_DGRAM_MAX + 2)
			break;
		i = w->pat_i;
		j = w->pat_j;
		if (i >= w->pat_end)
			return 0;
		if (j == 0 && i + 8 <= w->pat_end) {
			/* i + 8 <= pat_end <= the copied bytes: the mask only
			 * bounds i for the verifier */
			v = *(__u64 *)&w->dgram[i & (PARAPET_DGRAM_MAX - 1)];
			if (!has_zero_byte(v ^ first) && !has_zero_byte(v ^ other)) {
				w->pat_i = i + 8;
				continue;
			}
		}
		c = w->dgram[i & (PARAPET_DGRAM_MAX - 1)];
		if (w->pat_icase)
			c = kernel_toupper(c);
		p = w->pat[j & (PARAPET_IMG_PATTERN_MAX_LEN - 1)];
		if (p == c) {
			if (j + 1 >= w->pat_len)
				return 1;
			w->pat_i = i + 1;
			w->pat_j = j + 1;
		} else if (j > 0) {
			nj = w->pat_fail[(j - 1) & (PARAPET_IMG_PATTERN_MAX_LEN - 1)];
			if (nj >= j) {
				w->err = 23;
				return -1;
			}
			w->pat_j = nj;
		} else {
			w->pat_i = i + 1;
		}
	}
	/* the loop budget or the step bound ran out: never a guess */
	w->err = 23;
	return -1;
}

/*
 * Before a pattern constraint at image word `at` (its mask, 4 words) is
 * compared: every row its mask names that this walk has not searched yet
 * is searched now and its bit set in the key.  Returns 0, or 1 on an
 * error (w->err set).
 */
static __always_inline long patterns_fill(struct parapet_walk *w, __u32 at)
{
	__u32 b, k, rows, r;
	int got;

	rows = rd(w, PARAPET_HW_N_PATTERNS);
	if (w->err || rows > PARAPET_IMG_PATTERN_MAX_ROWS) {
		w->err = 23;
		return 1;
	}
#pragma unroll
	for (k = 0; k < 4; k++)
		w->pat_want[k] = rd(w, at + k) & ~w->pat_done[k];
	if (w->err)
		return 1;
	walk_for(b, rows) {
		r = b;
		if (!((w->pat_want[(r >> 5) & 3] >> (r & 31)) & 1))
			continue;
		w->pat_row = r;
		got = pattern_load(w);
		if (got < 0)
			return 1;
		if (got == 0) {
			got = pattern_search(w);
			if (got < 0)
				return 1;
		} else {
			got = 0;
		}
		r = w->pat_row;
		w->pat_done[(r >> 5) & 3] |= 1u << (r & 31);
		if (got)
			w->key[PARAPET_KW_PATTERNS + ((r >> 5) & 3)] |= 1u << (r & 31);
	}
	return 0;
}

#endif /* PARAPET_LIB_PATTERNS_H */
