/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Host program run by build.rs: prints the C layout of every struct in
 * parapet.h as a Rust table, so tests can compare it with the #[repr(C)]
 * mirror without retyping numbers by hand.  BPF and x86_64/aarch64 agree on
 * the layout of these fixed-width structs (all naturally aligned).
 */
#include <stddef.h>
#include <stdio.h>
#include "parapet.h"
#include "image.h"

#define S(t) printf("    (\"%s\", \"\", %zu),\n", #t, sizeof(struct t))
#define F(t, f) printf("    (\"%s\", \"%s\", %zu),\n", #t, #f, offsetof(struct t, f))

int main(void)
{
	printf("/// (struct, field, offset) from parapet.h; field \"\" = sizeof.\n");
	printf("pub const C_LAYOUT: &[(&str, &str, usize)] = &[\n");
	S(parapet_key);
	F(parapet_key, src);
	F(parapet_key, dst);
	F(parapet_key, ifindex);
	F(parapet_key, pkt_len);
	F(parapet_key, sport);
	F(parapet_key, dport);
	F(parapet_key, vlan_id);
	F(parapet_key, family);
	F(parapet_key, proto);
	F(parapet_key, icmp_type);
	F(parapet_key, icmp_code);
	F(parapet_key, tcp_flags);
	F(parapet_key, frag);
	F(parapet_key, flags);
	F(parapet_key, ctstate);
	S(parapet_action);
	F(parapet_action, verdict);
	F(parapet_action, flags);
	F(parapet_action, reject);
	S(parapet_counter);
	F(parapet_counter, packets);
	F(parapet_counter, bytes);
	S(parapet_lite_key);
	F(parapet_lite_key, proto);
	F(parapet_lite_key, dport);
	S(parapet_log_limit);
	F(parapet_log_limit, interval_ns);
	F(parapet_log_limit, tolerance_ns);
	F(parapet_log_limit, tat_ns);
	S(parapet_log_event);
	F(parapet_log_event, ts_ns);
	F(parapet_log_event, rule_id);
	F(parapet_log_event, verdict);
	F(parapet_log_event, hook);
	F(parapet_log_event, key);
	S(parapet_debug_rec);
	F(parapet_debug_rec, key);
	F(parapet_debug_rec, status);
	F(parapet_debug_rec, rule_id);
	F(parapet_debug_rec, verdict);
	F(parapet_debug_rec, seq);
	F(parapet_debug_rec, by_image);
	F(parapet_debug_rec, n_nonterm);
	F(parapet_debug_rec, nonterm);
	F(parapet_debug_rec, walk_err);
	F(parapet_debug_rec, sets);
	F(parapet_debug_rec, reject);
	F(parapet_debug_rec, ctstate);
	S(parapet_set_ref);
	F(parapet_set_ref, set_id);
	F(parapet_set_ref, kind);
	F(parapet_set_ref, family);
	F(parapet_set_ref, n_dims);
	F(parapet_set_ref, part);
	F(parapet_set_ref, width);
	S(parapet_set_desc);
	F(parapet_set_desc, n_shapes);
	F(parapet_set_desc, mask);
	S(parapet_set_lpm_key);
	F(parapet_set_lpm_key, prefixlen);
	F(parapet_set_lpm_key, set_id);
	F(parapet_set_lpm_key, addr);
	S(parapet_set_tuple_key);
	F(parapet_set_tuple_key, set_id);
	F(parapet_set_tuple_key, shape);
	F(parapet_set_tuple_key, data);
	S(parapet_set_val);
	F(parapet_set_val, expires_ns);
	F(parapet_set_val, prefixlen);
	S(parapet_ifname);
	S(parapet_image_page);
	printf("];\n");
	printf("/// Constants from parapet.h.\n");
	printf("pub const C_CONSTS: &[(&str, u64)] = &[\n");
#define C(n) printf("    (\"%s\", %llu),\n", #n, (unsigned long long)(n))
	C(PARAPET_ABI_VERSION);
	C(PARAPET_FAMILY_IPV4);
	C(PARAPET_FAMILY_IPV6);
	C(PARAPET_FRAG_FRAGMENT);
	C(PARAPET_FRAG_LATER);
	C(PARAPET_KEY_F_VLAN);
	C(PARAPET_KEY_F_CT);
	C(PARAPET_PARSE_OK);
	C(PARAPET_PARSE_NOT_IP);
	C(PARAPET_PARSE_TRUNCATED);
	C(PARAPET_PARSE_MALFORMED);
	C(PARAPET_PARSE_EXT_LIMIT);
	C(PARAPET_MAX_VLAN_TAGS);
	C(PARAPET_MAX_EXT_HDRS);
	C(PARAPET_MAX_OFF);
	C(PARAPET_VERDICT_ACCEPT);
	C(PARAPET_VERDICT_DROP);
	C(PARAPET_VERDICT_REJECT);
	C(PARAPET_ACTION_F_LOG);
	C(PARAPET_HOOK_XDP);
	C(PARAPET_HOOK_TC);
	C(PARAPET_STAT_MAX);
	C(PARAPET_IMAGE_PAGE_BYTES);
	C(PARAPET_IMAGE_DEFAULT_SLOT_PAGES);
	C(PARAPET_MAX_NONTERM);
	C(PARAPET_IMG_MAGIC);
	C(PARAPET_IMG_VERSION);
	C(PARAPET_IMG_HEADER_WORDS);
	C(PARAPET_IMG_KEY_WORDS);
	C(PARAPET_HW_TOTAL_WORDS);
	C(PARAPET_HW_CHECKSUM);
	C(PARAPET_CT_UNTRACKED);
	C(PARAPET_MAX_SET_REFS);
	C(PARAPET_MAX_SETS);
	C(PARAPET_SET_MAX_DIMS);
	C(PARAPET_SET_KEY_BYTES);
	C(PARAPET_SET_MAX_SHAPES);
	C(PARAPET_SET_LPM);
	C(PARAPET_SET_TUPLE);
	C(PARAPET_REJECT_DEFAULT);
	C(PARAPET_REJECT_ICMP_NET_UNREACHABLE);
	C(PARAPET_REJECT_ICMP_HOST_UNREACHABLE);
	C(PARAPET_REJECT_ICMP_PORT_UNREACHABLE);
	C(PARAPET_REJECT_ICMP_PROTO_UNREACHABLE);
	C(PARAPET_REJECT_ICMP_NET_PROHIBITED);
	C(PARAPET_REJECT_ICMP_HOST_PROHIBITED);
	C(PARAPET_REJECT_ICMP_ADMIN_PROHIBITED);
	C(PARAPET_REJECT_TCP_RESET);
	C(PARAPET_REJECT_ICMP6_NO_ROUTE);
	C(PARAPET_REJECT_ICMP6_ADM_PROHIBITED);
	C(PARAPET_REJECT_ICMP6_ADDR_UNREACHABLE);
	C(PARAPET_REJECT_ICMP6_PORT_UNREACHABLE);
	C(PARAPET_REJECT_ICMP6_POLICY_FAIL);
	C(PARAPET_REJECT_ICMP6_REJECT_ROUTE);
	C(PARAPET_REJECT_ICMPX_NO_ROUTE);
	C(PARAPET_REJECT_ICMPX_ADMIN_PROHIBITED);
	C(PARAPET_REJECT_ICMPX_HOST_UNREACHABLE);
	C(PARAPET_REJECT_ICMPX_PORT_UNREACHABLE);
	C(PARAPET_REJECT_UNKNOWN);
	C(PARAPET_REJECT_MAX_L3);
	C(PARAPET_REJECT_DEFAULT_RATE);
	C(PARAPET_REJECT_DEFAULT_BURST);
	C(PARAPET_CT_INVALID);
	C(PARAPET_CT_NEW);
	C(PARAPET_CT_ESTABLISHED);
	C(PARAPET_CT_RELATED);
	printf("];\n");
	return 0;
}
