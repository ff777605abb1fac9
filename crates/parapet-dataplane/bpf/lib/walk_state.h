/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * walk_state.h - the per-CPU scratch state of an image walk, shared by the
 * walker (walk.h), set membership (sets.h) and the decision (decide.h), and
 * the two loop forms the walker's loops are written with: the open-coded
 * iterator (walk_for) and the may_goto loop (loop_budget_spent).  The
 * walker finds the state once per packet; the remaining bpf_loop callbacks
 * (set membership, the stateful condition, non-terminal matches: all only
 * when the image uses them) find it again through walk_state(ctx).  See
 * walk.h for why loop state lives in a map value and not in registers.
 */
#ifndef PARAPET_LIB_WALK_STATE_H
#define PARAPET_LIB_WALK_STATE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parapet.h"
#include "image.h"
#include "maps.h"

struct parapet_walk {
	/* 3 words past the key: key_value() reads 4 words for every field and
	 * masks the upper three of a one-word field off, so a one-word field
	 * may be the key's last word (walk_key.h) */
	__u32 key[PARAPET_IMG_KEY_WORDS + 3];
	/* filled by the hook entry before parapet_decide (parapet.h) */
	struct parapet_key_ext ext;
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
	/* the entry index at cur[p] while cur[p] < end[p]: a merge step
	 * compares these instead of reading every leaf's head again (one
	 * image read per step, not one per partition) */
	__u32 head[PARAPET_IMG_MAX_PARTITIONS];
	__u32 total;
	/* leaf elements the merge has not taken yet: the step that takes
	 * the last one ends the merge (no step, and no iterator, only to
	 * find the leaves empty) */
	__u32 left;
	/* partitions whose leaf cursor is set up */
	__u32 parts_done;
	/* why the last walk was abandoned (0 = it was not); see the
	 * assignments of err for the codes */
	/* tree descent: the node, and the steps taken to it (in the map
	 * value, not a register, so the verifier does not follow each depth
	 * on its own: see loop_budget_spent) */
	__u32 ref;
	__u32 depth;
	/* merge scan */
	__u32 pos;
	__u32 done;
	__u32 entry_rec;
	__u32 entry_rule;
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
	/* 1 once the merge ended by deciding or by running out of
	 * candidates, not by its iteration cap */
	__u32 merged;
	/* 1 once key words IIF/OIF hold the interface names (key_ifnames) */
	__u32 ifn_done;
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
	/* the TCP option area, copied by the entry while the images test
	 * options (ext.tcp_opt_copied bytes; lib/tcp_options.h), and the
	 * walk's position in it */
	__u8 tcp_opt[PARAPET_TCP_OPT_MAX];
	__u32 opt_pos;
	/* -m string (lib/patterns.h): the datagram's first bytes, copied by
	 * the entry while the images test patterns (ext.dgram_copied); the
	 * rows this walk has searched and those a constraint wants; the row
	 * being searched: its pattern and prefix table, and the search */
	__u8 dgram[PARAPET_DGRAM_MAX];
	__u8 pat[PARAPET_IMG_PATTERN_MAX_LEN];
	__u8 pat_fail[PARAPET_IMG_PATTERN_MAX_LEN];
	__u32 pat_done[4];
	__u32 pat_want[4];
	__u32 pat_row;
	__u32 pat_len;
	__u32 pat_icase;
	__u32 pat_i;
	__u32 pat_j;
	__u32 pat_end;
	__u32 pat_at;
	__u32 pat_words;
	__u32 pat_steps;
};

/* Big-endian 4 bytes at p as a number (addresses and names are numbers
 * whose first byte is the most significant). */
static __always_inline __u32 be32_at(const __u8 *p)
{
	return ((__u32)p[0] << 24) | ((__u32)p[1] << 16) | ((__u32)p[2] << 8) |
	       p[3];
}

/* Interface `ifindex`'s name into the 4 key words at `at` (left zero when
 * the index is 0 or unknown). */
static __always_inline void key_ifname(struct parapet_walk *w, __u32 ifindex,
				       __u32 at)
{
	struct parapet_ifname *ifn;
	int k;

	ifn = ifindex ? bpf_map_lookup_elem(&parapet_ifnames, &ifindex) : 0;
	if (!ifn)
		return;
#pragma unroll
	for (k = 0; k < 4; k++)
		w->key[at + k] = be32_at((const __u8 *)&ifn->name[12 - 4 * k]);
}

/*
 * The key's interface-name words, looked up on first use: a hash lookup
 * per packet that only images with -i / -o (or interface sets) need.  The
 * output interface: only FORWARD and OUTPUT know it.
 */
static __always_inline void key_ifnames(struct parapet_walk *w)
{
	if (w->ifn_done)
		return;
	w->ifn_done = 1;
	key_ifname(w, w->pkey.ifindex, PARAPET_KW_IIF);
	key_ifname(w, w->pkey.oifindex, PARAPET_KW_OIF);
}

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

/*
 * Open-coded loops (the kernel's numeric iterator, Linux >= 6.4): the loop
 * body is inline code, not a callback behind an indirect call, and the
 * verifier checks it until its state repeats instead of once per
 * iteration.  Declared without __ksym like every kfunc here (src/kfunc.rs
 * resolves the calls; the loader refuses a kernel that lacks them).
 */
#ifndef PARAPET_HAVE_BPF_ITER_NUM
#define PARAPET_HAVE_BPF_ITER_NUM
struct bpf_iter_num {
	__u64 __opaque[1];
} __attribute__((aligned(8)));
#endif
extern int bpf_iter_num_new(struct bpf_iter_num *it, int start, int end);
extern int *bpf_iter_num_next(struct bpf_iter_num *it);
extern void bpf_iter_num_destroy(struct bpf_iter_num *it);

static __always_inline int walk_iter_next(struct bpf_iter_num *it, __u32 *i)
{
	int *v = bpf_iter_num_next(it);

	if (!v)
		return 0;
	*i = (__u32)*v;
	return 1;
}

/*
 * for (i = 0; i < n; i++) over an open-coded iterator; `break` ends it (the
 * cleanup attribute destroys the iterator on every way out).  n above the
 * kernel's 1 << 23 runs no iteration: callers check that their loop
 * finished its work.
 */
#define walk_for(i, n)                                                       \
	for (struct bpf_iter_num i##_it                                      \
		     __attribute__((cleanup(bpf_iter_num_destroy))),        \
	     *i##_on = (bpf_iter_num_new(&i##_it, 0, (int)(n)), &i##_it);    \
	     i##_on && walk_iter_next(&i##_it, &(i));)

#ifdef PARAPET_ITER_LOOPS
/*
 * The object for kernels without may_goto (6.6-6.8; build.rs compiles it
 * with -DPARAPET_ITER_LOOPS, the loader picks it by probing): the budget
 * loops are iterator loops of at most n passes, the budget never "runs
 * out".  Same bodies, same bounds checks inside them.
 */
#define budget_loop_var(i) __u32 i
#define budget_loop(i, n) walk_for(i, n)
static __always_inline int loop_budget_spent(void)
{
	return 0;
}
#else
/* A may_goto loop: the pass bound n is the body's own business. */
#define budget_loop_var(i)
#define budget_loop(i, n) for (;;)

/*
 * 1 once the verifier's loop budget ran out, else 0: the may_goto
 * instruction (Linux >= 6.9; BPF_JMP | BPF_JCOND, code 0xe5).  A loop that
 * asks this on every pass and keeps its counters in the scratch map value
 * converges in the verifier like an iterator loop, and costs a decrement
 * and a branch per pass at run time instead of a kfunc call.  Clang 14's
 * assembler does not know the mnemonic, so the instructions are spelled
 * out as bytes, with fixed jump offsets: may_goto +1 skips the goto +1
 * when the budget is spent, landing on "= 1".
 */
static __always_inline int loop_budget_spent(void)
{
	int spent;

	asm volatile("%0 = 0\n\t"
		     ".byte 0xe5, 0\n\t.short 1\n\t.long 0\n\t"
		     ".byte 0x05, 0\n\t.short 1\n\t.long 0\n\t"
		     "%0 = 1"
		     : "=r"(spent));
	return spent;
}
#endif /* PARAPET_ITER_LOOPS */

#endif /* PARAPET_LIB_WALK_STATE_H */
