/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * tcp_options.h - the TCP option kinds of a segment (key words 44..51) as
 * -m tcp --tcp-option reads them: xt_tcpudp's tcp_find_option walk of the
 * option area (parapet_model::tcp_option), once per packet for every kind.
 * The walk never goes where the kind it looks for would send it (it
 * compares before it steps), so one walk that sets a bit per kind it
 * reads answers every --tcp-option N: bit N of the two 128-bit bitmaps.
 *
 * Two halves, so that only rulesets that test options pay:
 * - the entry copies the area (at most 40 bytes) into the walk state
 *   while parapet_config[PARAPET_CFG_TCP_OPTIONS] is on (installs set it
 *   before an image that tests options goes live, as for the owner): one
 *   helper call (XDP: bpf_xdp_load_bytes; tc: bpf_skb_load_bytes;
 *   netfilter: from its packet copy).  A data offset that runs past the
 *   datagram makes the packet truncated (dropped) then: the kernel drops
 *   it too ("hotdrop") once a rule testing an option is reached.
 * - the walker walks the copy (parapet_tcp_options_fill, a global function
 *   the verifier checks once) when the image's header has
 *   PARAPET_IMG_FLAG_TCP_OPTIONS.  An area the entry did not copy (the
 *   switch off under such an image) abandons the walk: an unusable image,
 *   never options read as absent.
 */
#ifndef PARAPET_LIB_TCP_OPTIONS_H
#define PARAPET_LIB_TCP_OPTIONS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parapet.h"
#include "image.h"
#include "maps.h"
#include "parse.h"
#include "walk_state.h"

/* The option switch (PARAPET_CFG_TCP_OPTIONS), one inlined array load. */
static __always_inline int tcp_options_on(void)
{
	__u32 k = PARAPET_CFG_TCP_OPTIONS;
	__u32 *v = bpf_map_lookup_elem(&parapet_config, &k);

	return v && *v;
}

/*
 * How many option bytes the entry copies for a packet the parser left
 * with `status` and option area `area` (struct parapet_offs's tcp_opt):
 * 0 when there is nothing to copy (no area, the switch off, a packet not
 * parsed), -1 when the data offset runs past the datagram.
 */
static __always_inline int tcp_options_len(__u32 area, int status)
{
	if (status != PARAPET_PARSE_OK || area == 0 || !tcp_options_on())
		return 0;
	if (area > PARAPET_TCP_OPT_MAX)
		return -1;
	return area;
}

/* The walk state of scratch slot idx, or NULL. */
static __always_inline struct parapet_walk *tcp_options_state(__u32 idx)
{
	struct walk_cb_ctx wc = { .idx = idx };

	return walk_state(&wc);
}

/* The XDP entry's copy (scratch slot 0); returns the status to go on
 * with. */
static __always_inline int xdp_tcp_options(struct xdp_md *ctx,
					   const struct parapet_offs *offs,
					   int status)
{
	int n = tcp_options_len(offs->tcp_opt, status);
	struct parapet_walk *w;

	if (n == 0)
		return status;
	if (n < 0)
		return PARAPET_PARSE_TRUNCATED;
	w = tcp_options_state(0);
	if (w && n <= PARAPET_TCP_OPT_MAX &&
	    !bpf_xdp_load_bytes(ctx, offs->l4 + 20, w->tcp_opt, n))
		w->ext.tcp_opt_copied = n;
	return status;
}

/* A tc entry's copy (scratch slot 1). */
static __always_inline int tc_tcp_options(struct __sk_buff *skb,
					  const struct parapet_offs *offs,
					  int status)
{
	int n = tcp_options_len(offs->tcp_opt, status);
	struct parapet_walk *w;

	if (n == 0)
		return status;
	if (n < 0)
		return PARAPET_PARSE_TRUNCATED;
	w = tcp_options_state(1);
	if (w && n <= PARAPET_TCP_OPT_MAX &&
	    !bpf_skb_load_bytes(skb, offs->l4 + 20, w->tcp_opt, n))
		w->ext.tcp_opt_copied = n;
	return status;
}

/* The netfilter entry's copy, from its packet copy `pkt` (the parser's
 * offsets index it; its size bounds the area: the transport header
 * starts at most PARAPET_MAX_OFF into it). */
static __always_inline int nf_tcp_options(struct parapet_walk *w,
					  const __u8 *pkt,
					  const struct parapet_offs *offs,
					  int status)
{
	int n = tcp_options_len(offs->tcp_opt, status);
	__u32 at = offs->l4 + 20;

	if (n == 0)
		return status;
	if (n < 0)
		return PARAPET_PARSE_TRUNCATED;
	if (w && n <= PARAPET_TCP_OPT_MAX && at <= PARAPET_MAX_OFF + 20 &&
	    !bpf_probe_read_kernel(w->tcp_opt, n, pkt + at))
		w->ext.tcp_opt_copied = n;
	return status;
}

/*
 * Key words 44..51 from the copied option area: xt_tcpudp's walk, a bit
 * per byte it reads as a kind.  Kinds 0 and 1 take one byte; any other
 * its length byte's count, or one when that byte is 0 or lies past the
 * area (the kernel reads it there; whatever it holds, the walk ends).
 * At most 40 steps (each moves on at least one byte), as an open-coded
 * loop whose position lives in the walk state (walk_state.h: the
 * verifier then checks one pass).  Returns 0, or -1 when the area was
 * not copied.  Global: verified once, not at every walker's call.
 */
__noinline long parapet_tcp_options_fill(struct parapet_walk *w)
{
	__u32 len, i, k, step, n;

	if (!w)
		return -1;
	len = w->ext.tcp_opt_area;
	if (len != w->ext.tcp_opt_copied || len > PARAPET_TCP_OPT_MAX)
		return -1;
	w->opt_pos = 0;
	walk_for(n, PARAPET_TCP_OPT_MAX) {
		i = w->opt_pos;
		if (i >= len || i >= PARAPET_TCP_OPT_MAX)
			break;
		k = w->tcp_opt[i];
		w->key[PARAPET_KW_TCPOPT_LO + (k >> 5)] |= 1u << (k & 31);
		step = 1;
		if (k >= 2 && i + 1 < len && i + 1 < PARAPET_TCP_OPT_MAX &&
		    w->tcp_opt[i + 1])
			step = w->tcp_opt[i + 1];
		w->opt_pos = i + step;
	}
	return 0;
}

#endif /* PARAPET_LIB_TCP_OPTIONS_H */
