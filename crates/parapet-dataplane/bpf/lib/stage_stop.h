/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * stage_stop.h - the stage profile's early returns (issue 15): in the
 * bench-only object that build.rs compiles with -DPARAPET_STAGE_PROFILE
 * (parapet_stages.bpf.o), the program returns "pass" after the stage the
 * loader names in parapet_stop_after, so that timing each stop against the
 * full program prices every stage (docs/dataplane.md, "Profile",
 * "Session 14: stage prices").  In every other object the macros expand to
 * nothing: the production objects' code is what it was without them.
 *
 * parapet_stop_after is .rodata, frozen before the program loads: the
 * verifier knows its value, turns each check into a jump it always or
 * never takes and removes the code no stop can reach, so a stop costs no
 * instruction at run time and the stages before it run as in production.
 */
#ifndef PARAPET_LIB_STAGE_STOP_H
#define PARAPET_LIB_STAGE_STOP_H

#include <linux/bpf.h>

/* Where the program stops; 0 (none) runs it whole.  src/stage_profile.rs
 * mirrors these numbers. */
#define PARAPET_STOP_NONE 0
/* after parapet_parse returned, in the entry program */
#define PARAPET_STOP_PARSE 1
/* at the start of the image walk: the conntrack switch, the key
 * extension, parapet_decide's call, its statistics and generation lookup
 * and the scratch state's lookup are behind it */
#define PARAPET_STOP_DECIDE 2
/* after the image header is read and the image key built (with the
 * address types and set bits when the image uses them) */
#define PARAPET_STOP_KEY 3
/* after every partition's tree is walked to its leaf */
#define PARAPET_STOP_DESCENT 4
/* after the merge of the leaves: what is left is the verdict row, the
 * rule counter, the non-terminal matches and the hook statistics */
#define PARAPET_STOP_MERGE 5

/* image_walk's return value when it stopped (not a rule id, not -1) */
#define PARAPET_WALK_STOPPED (-2)

#ifdef PARAPET_STAGE_PROFILE
const volatile __u32 parapet_stop_after = PARAPET_STOP_NONE;

/* return `ret` from the enclosing function when the profile stops at
 * `stage` */
#define PARAPET_STOP_AT(stage, ret)                                          \
	do {                                                                 \
		if (parapet_stop_after == (stage))                           \
			return (ret);                                        \
	} while (0)
/* return `ret` when the profile stopped inside the walker: any stop after
 * the parse */
#define PARAPET_STOP_AFTER_WALK(ret)                                         \
	do {                                                                 \
		if (parapet_stop_after > PARAPET_STOP_PARSE)                 \
			return (ret);                                        \
	} while (0)
#define PARAPET_STOP_IF(cond, ret)                                           \
	do {                                                                 \
		if (cond)                                                    \
			return (ret);                                        \
	} while (0)
#else
#define PARAPET_STOP_AT(stage, ret)                                          \
	do {                                                                 \
	} while (0)
#define PARAPET_STOP_AFTER_WALK(ret)                                         \
	do {                                                                 \
	} while (0)
#define PARAPET_STOP_IF(cond, ret)                                           \
	do {                                                                 \
	} while (0)
#endif /* PARAPET_STAGE_PROFILE */

#endif /* PARAPET_LIB_STAGE_STOP_H */
