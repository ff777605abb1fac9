/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * image.h - constants of the classifier image, version 1, as specified in
 * docs/image-format.md (Rust: the parapet-image crate, which owns the
 * format).  The BPF walker in lib/walk.h reads images with these; the
 * dataplane's layout probe (layout_probe.c) prints them and a Rust test
 * (src/abi/layout.rs) checks them against parapet-image's constants.
 */
#ifndef PARAPET_IMAGE_H
#define PARAPET_IMAGE_H

#define PARAPET_IMG_MAGIC 0x54505250u /* "PRPT" little-endian */
#define PARAPET_IMG_VERSION 13
#define PARAPET_IMG_HEADER_WORDS 32
#define PARAPET_IMG_KEY_WORDS 57
#define PARAPET_IMG_NODE_WORDS 8
#define PARAPET_IMG_PARTITION_WORDS 4
#define PARAPET_IMG_VERDICT_WORDS 4
#define PARAPET_IMG_RECORD_HEADER_WORDS 4

/* Caps of the format (the walker's loop bounds). */
#define PARAPET_IMG_MAX_DEPTH 64
#define PARAPET_IMG_MAX_LEAF (1u << 23) /* also bpf_loop's limit */
#define PARAPET_IMG_MAX_PARTITIONS 8
/* The walker's cap of constraints per entry (one per fixed field + sets,
 * room for fields to come); anything above is a corrupt image. */
#define PARAPET_IMG_MAX_CONSTRAINTS 24
/* Binary search over at most 65535 sorted ranges: 17 halvings suffice. */
#define PARAPET_IMG_BSEARCH_STEPS 17

#define PARAPET_IMG_LEAF_BIT 0x80000000u
#define PARAPET_IMG_WIDE_BIT 0x8000u
/* A masked constraint: key & mask == value (no ranges; body mask, value). */
#define PARAPET_IMG_MASKED_BIT 0x4000u
#define PARAPET_IMG_MASK_NEGATE_BIT 0x2000u
#define PARAPET_IMG_FIXED_FIELDS 30 /* field ids 0..29 */
#define PARAPET_IMG_SET_FIELD 31
#define PARAPET_IMG_FLAG_PURE_FIRST_MATCH 1u
/* some entry reads the address types (key words 34, 35): lib/addr_type.h */
#define PARAPET_IMG_FLAG_ADDR_TYPES 2u
/* some entry tests a TCP option kind (key words 44..51): lib/tcp_options.h */
#define PARAPET_IMG_FLAG_TCP_OPTIONS 4u
/* some entry tests a -m string pattern (key words 52..55): lib/patterns.h */
#define PARAPET_IMG_FLAG_PATTERNS 8u
/* some entry reads the reverse-path outcome (key word 56): the entries
 * look the source up (lib/rev_path.h) while parapet_config says so */
#define PARAPET_IMG_FLAG_REV_PATH 16u
/* The pattern table (image version 12; parapet_image::patterns): rows of
 * [data_off, len | F_ICASE, from, to]; the hits are field 30, a wide
 * masked constraint. */
#define PARAPET_IMG_PATTERN_FIELD 30
#define PARAPET_IMG_PATTERN_ROW_WORDS 4
#define PARAPET_IMG_PATTERN_MAX_ROWS 128
#define PARAPET_IMG_PATTERN_MAX_LEN 128
#define PARAPET_IMG_PATTERN_F_ICASE 0x100u

/* Entry kinds (record word 1, bits 0..3). */
#define PARAPET_IMG_KIND_DECIDE 0
#define PARAPET_IMG_KIND_LOG 1
#define PARAPET_IMG_KIND_COUNT 2
#define PARAPET_IMG_KIND_JUMP 3
#define PARAPET_IMG_KIND_RETURN 4
#define PARAPET_IMG_KIND_COUNTED_BIT 0x10u
/* Bit 5: a stateful condition; its row in bits 24..31 (lib/stateful.h). */
#define PARAPET_IMG_KIND_STATEFUL_BIT 0x20u
#define PARAPET_IMG_STATEFUL_ROW_SHIFT 24

/* The stateful table (docs/image-format.md). */
#define PARAPET_IMG_STATEFUL_ROW_WORDS 8
#define PARAPET_IMG_STATEFUL_MAX_ROWS 256
#define PARAPET_IMG_STATEFUL_XT_LIMIT 1
#define PARAPET_IMG_STATEFUL_NFT_LIMIT 2
#define PARAPET_IMG_STATEFUL_F_OVER 0x100u
#define PARAPET_IMG_STATEFUL_RECENT 3
#define PARAPET_IMG_STATEFUL_RECENT_CMD_SHIFT 8
#define PARAPET_IMG_STATEFUL_F_RDEST 0x400u
#define PARAPET_IMG_STATEFUL_F_INVERT 0x800u
#define PARAPET_IMG_STATEFUL_F_REAP 0x1000u
#define PARAPET_IMG_STATEFUL_F_RTTL 0x2000u
#define PARAPET_IMG_STATEFUL_RECENT_MAX_HITCOUNT 255
#define PARAPET_IMG_STATEFUL_HASHLIMIT 4
#define PARAPET_IMG_STATEFUL_HASHLIMIT_MODE_SHIFT 8
#define PARAPET_IMG_STATEFUL_F_ABOVE 0x1000u
#define PARAPET_IMG_STATEFUL_HASHLIMIT_SRCMASK_SHIFT 16
#define PARAPET_IMG_STATEFUL_HASHLIMIT_DSTMASK_SHIFT 24
#define PARAPET_IMG_STATEFUL_HASHLIMIT_BURST_SHIFT 8
#define PARAPET_IMG_STATEFUL_DYNSET 5
#define PARAPET_IMG_STATEFUL_DYNSET_OP_SHIFT 8
#define PARAPET_IMG_STATEFUL_F_DYNSET_LIMIT 0x1000u
#define PARAPET_IMG_STATEFUL_F_DYNSET_OVER 0x2000u
#define PARAPET_IMG_STATEFUL_DYNSET_PORT_SHIFT 14
#define PARAPET_IMG_STATEFUL_DYNSET_PORT_CONST_SHIFT 16
#define PARAPET_IMG_STATEFUL_DYNSET_UNIT_SHIFT 20
#define PARAPET_IMG_STATEFUL_DYNSET_BURST_SHIFT 24
#define PARAPET_IMG_STATEFUL_QUOTA 6
#define PARAPET_IMG_STATEFUL_TIME 7
#define PARAPET_IMG_STATEFUL_STATISTIC_NTH 8
#define PARAPET_IMG_STATEFUL_STATISTIC_RANDOM 9
#define PARAPET_IMG_STATEFUL_F_KERNEL_TZ 0x100u
#define PARAPET_IMG_STATEFUL_F_CONTIGUOUS 0x200u
#define PARAPET_IMG_STATEFUL_TIME_DAYTIME_STOP_SHIFT 12
#define PARAPET_IMG_STATEFUL_TIME_WEEKDAYS_SHIFT 24
/* --hashlimit-mode bits, the kernel's XT_HASHLIMIT_HASH_* */
#define PARAPET_HASHLIMIT_HASH_DIP 1u
#define PARAPET_HASHLIMIT_HASH_DPT 2u
#define PARAPET_HASHLIMIT_HASH_SIP 4u
#define PARAPET_HASHLIMIT_HASH_SPT 8u

/* Header word indices. */
#define PARAPET_HW_MAGIC 0
#define PARAPET_HW_VERSION 1
#define PARAPET_HW_BACKEND 2
#define PARAPET_HW_FLAGS 3
#define PARAPET_HW_TOTAL_WORDS 4
#define PARAPET_HW_CHECKSUM 5
#define PARAPET_HW_N_ENTRIES 6
#define PARAPET_HW_N_PARTITIONS 7
#define PARAPET_HW_POLICY 8
#define PARAPET_HW_MAX_DEPTH 9
#define PARAPET_HW_MAX_LEAF 10
#define PARAPET_HW_MAX_RANGES 11
#define PARAPET_HW_SET_REF_COUNT 12
#define PARAPET_HW_PARTITIONS_OFF 13
#define PARAPET_HW_NODES_OFF 14
#define PARAPET_HW_N_NODES 15
#define PARAPET_HW_LEAVES_OFF 16
#define PARAPET_HW_LEAVES_WORDS 17
#define PARAPET_HW_ENTRY_TABLE_OFF 18
#define PARAPET_HW_ENTRIES_OFF 19
#define PARAPET_HW_ENTRIES_WORDS 20
#define PARAPET_HW_VERDICTS_OFF 21
#define PARAPET_HW_N_VERDICTS 22
#define PARAPET_HW_STRINGS_OFF 23
#define PARAPET_HW_STRINGS_BYTES 24
#define PARAPET_HW_FANOUT_OFF 25
#define PARAPET_HW_FANOUT_WORDS 26
#define PARAPET_HW_STATEFUL_OFF 27
#define PARAPET_HW_N_STATEFUL 28
#define PARAPET_HW_PATTERNS_OFF 29
#define PARAPET_HW_N_PATTERNS 30

/* Node kinds (node word 0, bits 8..15). */
#define PARAPET_IMG_NODE_BINARY 0   /* range cut: <= cut left, else right */
#define PARAPET_IMG_NODE_MULTIWAY 1 /* 2^bits equal-width children */
#define PARAPET_IMG_MAX_FANOUT_BITS 8

/* Key word layout (field id -> first key word). */
#define PARAPET_KW_FAMILY 0
#define PARAPET_KW_SADDR 1
#define PARAPET_KW_DADDR 5
#define PARAPET_KW_PROTO 9
#define PARAPET_KW_SPORT 10
#define PARAPET_KW_DPORT 11
#define PARAPET_KW_ICMP 12
#define PARAPET_KW_TCPFLAGS 13
#define PARAPET_KW_IIF 14
#define PARAPET_KW_OIF 18
#define PARAPET_KW_CTSTATE 22
#define PARAPET_KW_FRAGMENT 23
#define PARAPET_KW_SETS 24
/* Fields added after the set mask (their ids 12, 13, 14). */
#define PARAPET_KW_TTL 26
#define PARAPET_KW_DSCP 27
#define PARAPET_KW_LENGTH 28
#define PARAPET_KW_CTSTATUS 29
/* Field ids 16, 17: mark, ct mark; 18, 19: the ct original destination
 * port and protocol -- all from the walk state's key extension (parapet.h). */
#define PARAPET_KW_MARK 30
#define PARAPET_KW_CTMARK 31
#define PARAPET_KW_CTORIGDPORT 32
#define PARAPET_KW_CTPROTO 33
/* Field ids 20, 21: the source and destination address types (RTN_*,
 * lib/addr_type.h, when the header has PARAPET_IMG_FLAG_ADDR_TYPES); 22: the link-layer packet type (PACKET_*, from the key
 * extension's pkt_type). */
#define PARAPET_KW_STYPE 34
#define PARAPET_KW_DTYPE 35
#define PARAPET_KW_PKTTYPE 36
/* the source MAC, 4 words like an address (the upper two always 0):
 * bits 0..31, then 32..47 and the presence
 * bit 48 (bit 16 of the second word) */
#define PARAPET_KW_MACSRC 37
/* Field id 24: the first IPv6 routing header, packed (the key
 * extension's rt, from the parser's struct parapet_offs); 25, 26: the
 * socket owner's uid and gid (the key extension's sk_uid, sk_gid). */
#define PARAPET_KW_RT 41
#define PARAPET_KW_SKUID 42
#define PARAPET_KW_SKGID 43
/* Field ids 27, 28: the TCP option kinds the segment's option area holds,
 * two 128-bit bitmaps (bit n of word 44 + n / 32: kind n), filled by
 * lib/tcp_options.h when the header has PARAPET_IMG_FLAG_TCP_OPTIONS. */
#define PARAPET_KW_TCPOPT_LO 44
#define PARAPET_KW_TCPOPT_HI 48
/* Field id 30 (apart from the fixed fields): the pattern hits, bit i =
 * pattern row i found in the datagram; filled lazily by lib/patterns.h
 * when a candidate's constraint reads them. */
#define PARAPET_KW_PATTERNS 52
/* Field id 29: the reverse-path outcome (parapet_model::rev_path: 0 iif,
 * 1 other, 2 none), from the key extension's rev_path (lib/rev_path.h;
 * image version 13). */
#define PARAPET_KW_REVPATH 56

/* ctstate values of the key. */
#define PARAPET_CT_INVALID 0
#define PARAPET_CT_NEW 1
#define PARAPET_CT_ESTABLISHED 2
#define PARAPET_CT_RELATED 3
#define PARAPET_CT_UNTRACKED 4

#endif /* PARAPET_IMAGE_H */
