/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * time_window.h - time windows (iptables -m time, nft meta time|hour|day)
 * for stateful.h: xt_time.c's time_mt on a time row of the image (kind |
 * flags | --timestop << 12; p0 --datestart, p1 --datestop, p2 --timestart
 * | weekdays << 24, p3 month days; docs/image-format.md).  The Rust twin is
 * parapet_model::TimeWindow::admits, driven by parapet_compile::ImageState
 * from the same row words.
 *
 * Now, in UTC seconds: (CLOCK_BOOTTIME ns + the offset in
 * parapet_wall_clock) / 1e9 (the test clock replaces the boot clock).  The
 * boot clock keeps counting through suspend, so the offset only moves when
 * the wall clock is stepped or slewed: parapetd rewrites it every second.
 */
#ifndef PARAPET_LIB_TIME_WINDOW_H
#define PARAPET_LIB_TIME_WINDOW_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "image.h"
#include "clock.h"

#define PARAPET_SECONDS_PER_DAY 86400ull
#define PARAPET_ALL_MONTHDAYS 0xfffffffeu

/* Day of the month (1..31) of `days` since 1970-01-01 (days >= -1, wrapped
 * in a u64): the proleptic Gregorian calendar, in unsigned arithmetic
 * (parapet_model::civil_from_days). */
static __always_inline __u32 time_monthday(__u64 days)
{
	__u64 z = days + 719468, era = z / 146097, doe = z - era * 146097;
	__u64 yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	__u64 doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	__u64 mp = (5 * doy + 2) / 153;

	return (__u32)(doy - (153 * mp + 2) / 5 + 1);
}

/*
 * Now in seconds since the epoch, UTC or, with --kerneltz (`kind`'s flag),
 * the kernel's sys_tz; -1 when the wall clock was never written or reads
 * before 1970.  Its own function so the row's words do not live across
 * the helper calls: with no stack of its own in either function (keys in
 * global data), the walk's deepest call chain (stateful_cb, at the
 * verifier's 512 bytes) does not grow.
 */
static __noinline __s64 time_now(__u32 kind)
{
	__u64 *test = bpf_map_lookup_elem(
		&parapet_test_clock,
		(const void *)&parapet_wall_keys[PARAPET_WALL_OFFSET]);
	__u64 now = test ? *test : 0;
	__s64 *v, stamp;

	if (!now)
		now = bpf_ktime_get_boot_ns();
	v = bpf_map_lookup_elem(
		&parapet_wall_clock,
		(const void *)&parapet_wall_keys[PARAPET_WALL_OFFSET]);
	if (!v || *v == 0)
		return -1;
	stamp = (__s64)(now + (__u64)*v);
	if (stamp < 0)
		return -1;
	stamp = (__s64)((__u64)stamp / 1000000000ull);
	if (kind & PARAPET_IMG_STATEFUL_F_KERNEL_TZ) {
		v = bpf_map_lookup_elem(
			&parapet_wall_clock,
			(const void *)&parapet_wall_keys[PARAPET_WALL_MINUTES_WEST]);
		if (!v)
			return -1;
		stamp -= 60 * *v;
	}
	return stamp;
}

/*
 * 1 when the window of a time row (kind | flags, lo = p0 | p1 << 32, hi =
 * p2 | p3 << 32) is open now: xt_time's time_mt.  0 when closed, and when
 * the wall clock was never written (a window is then never open).
 */
static __noinline int time_admit(__u32 kind, __u64 lo, __u64 hi)
{
	__s64 stamp = time_now(kind);
	__u32 start, stop, weekdays, monthdays, packet_time;
	__u64 days;

	/* --datestart/--datestop (both >= 0: stamp is from here on; a
	 * clock never written reads -1) */
	if (stamp < (__s64)(__u32)lo || stamp > (__s64)(lo >> 32))
		return 0;
	start = (__u32)hi & 0x00ffffff;
	stop = kind >> PARAPET_IMG_STATEFUL_TIME_DAYTIME_STOP_SHIFT;
	weekdays = (__u32)hi >> PARAPET_IMG_STATEFUL_TIME_WEEKDAYS_SHIFT;
	monthdays = (__u32)(hi >> 32);
	packet_time = (__u32)((__u64)stamp % PARAPET_SECONDS_PER_DAY);
	days = (__u64)stamp / PARAPET_SECONDS_PER_DAY;
	if (start < stop) {
		if (packet_time < start || packet_time > stop)
			return 0;
	} else {
		if (packet_time < start && packet_time > stop)
			return 0;
		/* after midnight, a contiguous window is the day before's
		 * (days may wrap to -1: the sums below wrap back) */
		if ((kind & PARAPET_IMG_STATEFUL_F_CONTIGUOUS) &&
		    packet_time <= stop)
			days -= 1;
	}
	/* 1970-01-01 was a Thursday: Monday = 1 ... Sunday = 7 */
	if (!(weekdays & (1u << ((days + 3) % 7 + 1))))
		return 0;
	if (monthdays != PARAPET_ALL_MONTHDAYS &&
	    !(monthdays & (1u << time_monthday(days))))
		return 0;
	return 1;
}

#endif /* PARAPET_LIB_TIME_WINDOW_H */
