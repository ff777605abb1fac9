/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * clock.h - the time stateful conditions see (stateful.h, dynset.h): the
 * kernel's HZ, set by the loader, and the test clock, with jiffies = ns /
 * (1e9 / HZ) (parapet_model::Clock).
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

static __always_inline __u64 stateful_test_ns(void)
{
	__u32 zero = 0;
	__u64 *t = bpf_map_lookup_elem(&parapet_test_clock, &zero);

	return t ? *t : 0;
}

#endif /* PARAPET_LIB_CLOCK_H */
