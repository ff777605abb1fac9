/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * maps.h - every map user space opens, sizes or fills by name (src/load.rs
 * looks them up by these names: keep them), and the image slot size it sets
 * at load time.  Scratch maps private to one job live with it
 * (parapet_scratch in walk_state.h, parapet_reply in reject.h).
 */
#ifndef PARAPET_LIB_MAPS_H
#define PARAPET_LIB_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parapet.h"

/* Pages per image slot; the loader sizes parapet_image to 2x this. */
const volatile __u32 parapet_slot_pages = PARAPET_IMAGE_DEFAULT_SLOT_PAGES;

/* Rule id -> action; entry 0 is the policy.  Resized by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct parapet_action);
} parapet_actions SEC(".maps");

/* Rule id -> per-CPU packet/byte counters; same size as parapet_actions. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct parapet_counter);
} parapet_counters SEC(".maps");

/* Rule id -> log rate limit; same size as parapet_actions. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct parapet_log_limit);
} parapet_log_limits SEC(".maps");

/* LOG events for user space. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} parapet_log SEC(".maps");

/* enum parapet_stat -> per-CPU count. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PARAPET_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} parapet_stats SEC(".maps");

/* (hook row, interface) -> per-CPU packets, bytes, drops (parapet.h). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PARAPET_HOOK_ROWS * PARAPET_HOOK_IFACES);
	__type(key, __u32);
	__type(value, struct parapet_hook_stat);
} parapet_hook_stats SEC(".maps");

/* Interim classifier (lite.h): (proto, dport) -> rule id. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct parapet_lite_key);
	__type(value, __u32);
} parapet_lite SEC(".maps");

/* Two classifier-image slots of parapet_slot_pages pages each per image
 * (PARAPET_IMAGES): slot s of image i is slot number 2 * i + s. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * PARAPET_IMAGES * PARAPET_IMAGE_DEFAULT_SLOT_PAGES);
	__type(key, __u32);
	__type(value, struct parapet_image_page);
} parapet_image SEC(".maps");

/* [0] = generation; 0 = no image, else slot (gen & 1) of every image is
 * live. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} parapet_gen SEC(".maps");

/*
 * Never read by the programs.  User space stores parapet_gen in it after a
 * generation flip: updating a map-in-map makes the kernel wait for an RCU
 * grace period, so when the update returns, no program run that could have
 * seen the old generation is still walking the old slot, and the slot may
 * be overwritten.
 */
struct parapet_gen_inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct parapet_gen_inner);
} parapet_rcu_barrier SEC(".maps");

/* Runtime switches user space flips without reloading (PARAPET_CFG_*).
 * An array lookup with a constant key is inlined by the verifier, so
 * reading a switch costs a load. */
#define PARAPET_CFG_CT 0 /* non-zero: look packets up in conntrack */
/* non-zero: skip the per-packet statistics no rule needs
 * (PARAPET_STAT_PACKETS, PARAPET_STAT_IMAGE, parapet_hook_stats); 0, the
 * map's initial value, counts them, so a program nobody configured counts */
#define PARAPET_CFG_STATS_OFF 1
/* the tc placement (tc_hooks.h): bit 2 * (hook - PARAPET_HOOK_NF_PREROUTING)
 * + (IPv6 ? 1 : 0) is set when the ruleset has a chain at that hook for that
 * family (a netfilter link would exist there) */
/* non-zero: the live images constrain the socket owner; the netfilter
 * program reads it at LOCAL_OUT and POST_ROUTING (nf.h, nf_sk_owner) */
#define PARAPET_CFG_OWNER 2
#define PARAPET_CFG_TC_HOOKS 3
/* non-zero: the live images test TCP option kinds; the entries copy the
 * option area into the walk state (lib/tcp_options.h) */
#define PARAPET_CFG_TCP_OPTIONS 4
/* non-zero: the entries copy the datagram for -m string (lib/patterns.h) */
#define PARAPET_CFG_PATTERNS 5
/* non-zero: the XDP and tc ingress entries look each packet's source up
 * in the host's routes (lib/rev_path.h) */
#define PARAPET_CFG_REV_PATH 6
#define PARAPET_CFG_WORDS 7
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PARAPET_CFG_WORDS);
	__type(key, __u32);
	__type(value, __u32);
} parapet_config SEC(".maps");

/* REJECT replies: one global GCRA bucket (interval 0 = never answer). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct parapet_log_limit);
} parapet_reject_limit SEC(".maps");

/* REJECTs at the netfilter hooks, for parapetd to answer
 * (struct parapet_nf_reject; lib/nf_reject.h).  Full: no answer, counted
 * in PARAPET_STAT_NF_REJECT_RING_FULL. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} parapet_nf_reject SEC(".maps");

/* Test mode: the last packet's key and decision. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct parapet_debug_rec);
} parapet_debug SEC(".maps");

/* ifindex -> name, for the key's iif field; filled by user space. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct parapet_ifname);
} parapet_ifnames SEC(".maps");

/* ---- set elements (sets.h, docs/dataplane.md "Sets") ------------------ */

/* (slot * 64 + reference) -> how to build the reference's key. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * PARAPET_MAX_SET_REFS);
	__type(key, __u32);
	__type(value, struct parapet_set_ref);
} parapet_set_refs SEC(".maps");

/* set id -> the shapes of a tuple set. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PARAPET_MAX_SETS);
	__type(key, __u32);
	__type(value, struct parapet_set_desc);
} parapet_set_descs SEC(".maps");

/* Resized by the loader (LoadOptions::set_lpm_entries). */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 1 << 20);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct parapet_set_lpm_key);
	__type(value, struct parapet_set_val);
} parapet_set_lpm SEC(".maps");

/* Single addresses of address sets, looked up before the trie (sets.h);
 * resized by the loader (SetSizing::exact4_entries, exact6_entries).
 * A hash insert costs a fraction of a trie insert (docs/sets.md). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 20);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct parapet_set_exact4_key);
	__type(value, __u64);
} parapet_set_exact4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 18);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct parapet_set_exact6_key);
	__type(value, __u64);
} parapet_set_exact6 SEC(".maps");

/* Resized by the loader (LoadOptions::set_tuple_entries). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 20);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct parapet_set_tuple_key);
	__type(value, struct parapet_set_val);
} parapet_set_tuple SEC(".maps");

#endif /* PARAPET_LIB_MAPS_H */
