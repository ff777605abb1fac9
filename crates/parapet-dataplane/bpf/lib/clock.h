/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * clock.h - the time stateful conditions see (stateful.h, dynset.h,
 * time_window.h): the kernel's HZ, set by the loader, the test clock, with
 * jiffies = ns / (1e9 / HZ) (parapet_model::Clock), and the wall clock's
 * offset from the boot clock.
 */
#ifndef PARAPET_LIB_CLOCK_H
#define PARAPET_LIB_CLOCK_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* The kernel's HZ, set by the loader; 0 (unknown): xt limits never pass. */
const volatile __u32 parapet_hz = 0;

/* Tests only: when [0] is non-zero, the time (ns) every check sees, with
 * jiffies = ns / (1e9 / HZ) (parapet_model::Clock). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} parapet_test_clock SEC(".maps");

/* Time windows' wall clock (time_window.h): [PARAPET_WALL_OFFSET] is
 * the boot -> UTC offset in ns (CLOCK_REALTIME - CLOCK_BOOTTIME, written
 * by the loader and refreshed by parapetd every second: docs/dataplane.md,
 * "Wall-clock time"); 0 = never written, and time windows stay closed.
 * [PARAPET_WALL_MINUTES_WEST] is the kernel's sys_tz.tz_minuteswest, for
 * --kerneltz.  One 64-bit word each: a reader never sees half an update. */
#define PARAPET_WALL_OFFSET 0
#define PARAPET_WALL_MINUTES_WEST 1
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __s64);
} parapet_wall_clock SEC(".maps");

/* The wall clock's keys in global data: a key on the stack would give
 * time_admit a frame (the walk's call chain is at the verifier's 512
 * bytes). */
const volatile __u32 parapet_wall_keys[2] = { PARAPET_WALL_OFFSET,
					      PARAPET_WALL_MINUTES_WEST };

static __always_inline __u64 stateful_test_ns(void)
{
	__u32 zero = 0;
	__u64 *t = bpf_map_lookup_elem(&parapet_test_clock, &zero);

	return t ? *t : 0;
}

#endif /* PARAPET_LIB_CLOCK_H */
