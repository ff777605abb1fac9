/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * walk_state.h - the per-CPU scratch state of an image walk, shared by the
 * walker (walk.h), set membership (sets.h) and the decision (decide.h).
 * Every bpf_loop callback finds it again through walk_state(ctx); see walk.h
 * for why loop state lives in a map value and not in registers.
 */
#ifndef PARAPET_LIB_WALK_STATE_H
#define PARAPET_LIB_WALK_STATE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parapet.h"
#include "image.h"

struct parapet_walk {
	__u32 key[PARAPET_IMG_KEY_WORDS];
	__u32 slot;
	__u32 err;
	/* header */
	__u32 partitions_off;
	__u32 nodes_off;
	__u32 n_nodes;
	__u32 fanout_off;
	__u32 leaves_off;
	__u32 table_off;
	__u32 n_entries;
	__u32 entries_off;
	__u32 verdicts_off;
	__u32 n_verdicts;
	__u32 policy;
	__u32 n_parts;
	/* leaf cursors: [cur, end) word indices per partition */
	__u32 cur[PARAPET_IMG_MAX_PARTITIONS];
	__u32 end[PARAPET_IMG_MAX_PARTITIONS];
	__u32 total;
	/* why the last walk was abandoned (0 = it was not); see the
	 * assignments of err for the codes */
	/* tree descent */
	__u32 ref;
	/* merge scan */
	__u32 pos;
	__u32 done;
	__u32 entry_rec;
	/* record matching */
	__u32 cpos;
	__u32 cmatch;
	/* the record's kind word: with the stateful bit, the constraint loop
	 * runs one more step, the condition (lib/stateful.h) */
	__u32 stateful_k;
	/* range search */
	__u32 val[4];
	__u32 base;
	__u32 stride;
	__u32 wide;
	__u32 lo;
	__u32 hi;
	/* results */
	__u32 verdict;
	__u32 n_nonterm;
	__u32 nonterm_rule[PARAPET_MAX_NONTERM];
	__u32 nonterm_kind[PARAPET_MAX_NONTERM];
	__u32 nonterm_dropped;
	__u32 hook;
	struct parapet_key pkey;
	/* set membership (sets.h) */
	__u64 now;
	union {
		__u8 sbytes[64];
		__u32 sword[16];
	};
	__u8 sval[16];
	struct parapet_set_ref sref;
	__u32 soff;
	__u32 smember;
	struct parapet_set_lpm_key lkey;
	struct parapet_set_tuple_key tkey;
};

/*
 * One scratch state per hook and CPU: 0 = XDP, 1 = tc, and from
 * PARAPET_SCRATCH_NF one per nesting level of the netfilter program (lib/nf.h:
 * an OUTPUT run in process context can be interrupted by a softirq that runs
 * INPUT or FORWARD, or OUTPUT again for a TCP ACK, on the same CPU).
 */
#define PARAPET_SCRATCH_NF 2
#define PARAPET_NF_NEST 4
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PARAPET_SCRATCH_NF + PARAPET_NF_NEST);
	__type(key, __u32);
	__type(value, struct parapet_walk);
} parapet_scratch SEC(".maps");

/* bpf_loop callback context: which scratch slot to use. */
struct walk_cb_ctx {
	__u32 idx;
};

static __always_inline struct parapet_walk *walk_state(void *ctx)
{
	__u32 idx = ((struct walk_cb_ctx *)ctx)->idx;

	return bpf_map_lookup_elem(&parapet_scratch, &idx);
}

#endif /* PARAPET_LIB_WALK_STATE_H */
