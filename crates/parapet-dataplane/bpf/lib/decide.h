/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * decide.h - parse outcome -> verdict: the live image decides through the
 * walker (walk.h) and counts and logs its non-terminal matches; without a
 * usable image the interim classifier (lite.h) does.
 */
#ifndef PARAPET_LIB_DECIDE_H
#define PARAPET_LIB_DECIDE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parapet.h"
#include "image.h"
#include "maps.h"
#include "counters.h"
#include "log.h"
#include "walk_state.h"
#include "walk.h"
#include "debug.h"
#include "lite.h"
#include "stage_stop.h"

/* Count (and log, for LOG entries) one non-terminal match of the image. */
static long nonterm_cb(__u32 i, void *ctx)
{
	struct parapet_walk *w = walk_state(ctx);
	__u32 rule;

	if (!w || i >= PARAPET_MAX_NONTERM)
		return 1;
	rule = w->nonterm_rule[i & (PARAPET_MAX_NONTERM - 1)];
	count_rule(rule, w->pkey.pkt_len);
	if (w->nonterm_kind[i & (PARAPET_MAX_NONTERM - 1)] == PARAPET_IMG_KIND_LOG)
		parapet_log_packet(rule, w->verdict, w->hook, &w->pkey);
	return 0;
}

/* Apply an image decision: count the deciding rule and every non-terminal
 * match, log the LOG entries, return the verdict. */
static __always_inline __u32 image_finish(__u32 idx, __u32 rule_id,
					  const struct parapet_key *key,
					  int status, __u32 hook)
{
	struct walk_cb_ctx c = { .idx = idx };
	struct parapet_walk *w = walk_state(&c);

	if (!w)
		return PARAPET_VERDICT_DROP;
	if (stats_on())
		stat_inc(PARAPET_STAT_IMAGE);
	count_rule(rule_id, key->pkt_len);
	if (w->nonterm_dropped)
		stat_inc(PARAPET_STAT_NONTERM_TRUNC);
	/* the walk left the packet's key in w->pkey; most rulesets match no
	 * non-terminal entry, and then there is no loop to start */
	w->hook = hook;
	if (w->n_nonterm)
		bpf_loop(w->n_nonterm, nonterm_cb, &c, 0);
	debug_record(key, status, rule_id, w->verdict, w, 0);
	return w->verdict;
}

/*
 * Parse outcome -> verdict.  Non-IP frames pass untouched (ARP and
 * neighbour discovery must work and rules only speak IP).  Truncated or
 * malformed IP, and chains too long to walk, are dropped: the kernel would
 * drop most of them anyway, and the rest are evasion attempts.
 */
/* Arithmetic, not a switch: the netfilter program's hook is a range to
 * the verifier, and a switch would make it walk the classifier once per
 * hook (parapet.h, PARAPET_HOOK_NF_*). */
static __always_inline __u32 hook_image(__u32 hook)
{
	return hook >= PARAPET_HOOK_NF_PREROUTING ?
		       hook - PARAPET_HOOK_NF_PREROUTING + PARAPET_IMAGE_NF_PREROUTING :
		       PARAPET_IMAGE_IFACE;
}

/*
 * idx: the walk's scratch slot (walk_state.h), chosen by the caller.
 * Inlined into every entry program (session 14): a call costs ~7 ns with
 * this machine's return thunks (docs/dataplane.md, "Session 14"), and
 * inlined it lengthens no call chain: the entry frames hardly grow
 * (parapet_xdp 160 -> 176 bytes) while parapet_decide's 128-byte frame
 * leaves every chain (the deepest, parapet_tc_hooks_in's, 464 -> 336).
 * The verifier walks ~9-15 % more instructions (verified_insns.sh).
 */
static __always_inline __u32 parapet_decide(const struct parapet_key *key,
					    int status, __u32 hook, __u32 idx)
{
	__u32 walk_err = 0;

	if (stats_on())
		stat_inc(PARAPET_STAT_PACKETS);
	if (status == PARAPET_PARSE_NOT_IP) {
		stat_inc(PARAPET_STAT_NOT_IP);
		debug_record(key, status, 0, PARAPET_VERDICT_ACCEPT, 0, walk_err);
		return PARAPET_VERDICT_ACCEPT;
	}
	if (status != PARAPET_PARSE_OK) {
		stat_inc(status == PARAPET_PARSE_TRUNCATED ?
				 PARAPET_STAT_TRUNCATED :
			 status == PARAPET_PARSE_MALFORMED ?
				 PARAPET_STAT_MALFORMED :
				 PARAPET_STAT_EXT_LIMIT);
		debug_record(key, status, 0, PARAPET_VERDICT_DROP, 0, walk_err);
		return PARAPET_VERDICT_DROP;
	}

	/* The live image decides when there is one and it is usable. */
	__u32 zero = 0;
	__u32 *gen = bpf_map_lookup_elem(&parapet_gen, &zero);
	if (gen && *gen) {
		long r = image_walk(idx, 2 * hook_image(hook) + (*gen & 1), key);
		PARAPET_STOP_IF(r == PARAPET_WALK_STOPPED, PARAPET_VERDICT_ACCEPT);
		if (r >= 0)
			return image_finish(idx, (__u32)r, key, status, hook);
		stat_inc(PARAPET_STAT_IMAGE_ERROR);
		struct walk_cb_ctx c = { .idx = idx };
		struct parapet_walk *w = walk_state(&c);
		walk_err = w ? w->err : 0xffff;
	}
	/* The interim classifier and the action table speak for the chain
	 * placed on interfaces; a netfilter hook without a usable image of
	 * its own chain fails closed. */
	if (hook_image(hook) != PARAPET_IMAGE_IFACE) {
		debug_record(key, status, 0, PARAPET_VERDICT_DROP, 0, walk_err);
		return PARAPET_VERDICT_DROP;
	}

	__u32 rule_id = lite_classify(key);
	struct parapet_action *act =
		bpf_map_lookup_elem(&parapet_actions, &rule_id);
	if (!act) {
		/* rule id beyond the table: fail closed */
		stat_inc(PARAPET_STAT_NO_ACTION);
		debug_record(key, status, rule_id, PARAPET_VERDICT_DROP, 0, walk_err);
		return PARAPET_VERDICT_DROP;
	}
	__u32 verdict = act->verdict;
	__u8 flags = act->flags;

	if (verdict == PARAPET_VERDICT_REJECT)
		verdict |= (__u32)act->reject << 8;

	count_rule(rule_id, key->pkt_len);
	if (flags & PARAPET_ACTION_F_LOG)
		parapet_log_packet(rule_id, verdict & 0xff, hook, key);
	debug_record(key, status, rule_id, verdict, 0, walk_err);
	return verdict;
}

#endif /* PARAPET_LIB_DECIDE_H */
