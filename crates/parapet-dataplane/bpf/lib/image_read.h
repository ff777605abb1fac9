/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * image_read.h - the walker's bounds-checked reads of the classifier image
 * (one word, or a window of words within one page) and the 128-bit
 * comparison of what it reads.  See walk.h for the walker.
 */
#ifndef PARAPET_LIB_IMAGE_READ_H
#define PARAPET_LIB_IMAGE_READ_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parapet.h"
#include "image.h"
#include "maps.h"
#include "walk_state.h"

/*
 * Image access: 32-bit word `word` of image slot `slot`, or -1 when the word
 * lies outside the slot.  Every image read of the walker goes through here,
 * so an image can never make the program read outside its slot.
 */
static __always_inline int image_word(__u32 slot, __u32 word, __u32 *out)
{
	if ((word / PARAPET_IMAGE_PAGE_WORDS) >= parapet_slot_pages)
		return -1;
	__u32 page = slot * parapet_slot_pages + word / PARAPET_IMAGE_PAGE_WORDS;
	struct parapet_image_page *pg = bpf_map_lookup_elem(&parapet_image, &page);
	if (!pg)
		return -1;
	*out = pg->w[word & (PARAPET_IMAGE_PAGE_WORDS - 1)];
	return 0;
}

/* Image word `word` of the walk's slot; a failed read poisons the walk. */
static __always_inline __u32 rd(struct parapet_walk *w, __u32 word)
{
	__u32 v = 0;

	if (image_word(w->slot, word, &v) < 0)
		w->err = 1;
	return v;
}

/*
 * n consecutive words at `word` of the walk's slot through one map lookup,
 * or NULL when they straddle a page (the caller then reads word by word).
 * n must be a constant; the bound on `in` is what lets the verifier accept
 * reads up to p[n - 1].
 */
static __always_inline const __u32 *img_window(struct parapet_walk *w,
					       __u32 word, const __u32 n)
{
	__u32 in = word & (PARAPET_IMAGE_PAGE_WORDS - 1);
	__u32 page;
	struct parapet_image_page *pg;

	if (in > PARAPET_IMAGE_PAGE_WORDS - n)
		return 0;
	if ((word / PARAPET_IMAGE_PAGE_WORDS) >= parapet_slot_pages)
		return 0;
	page = w->slot * parapet_slot_pages + word / PARAPET_IMAGE_PAGE_WORDS;
	pg = bpf_map_lookup_elem(&parapet_image, &page);
	if (!pg)
		return 0;
	return &pg->w[in];
}

/* Compare two 128-bit values stored least significant word first. */
static __always_inline int cmp128(const __u32 *a, const __u32 *b)
{
	int k;

#pragma unroll
	for (k = 3; k >= 0; k--) {
		if (a[k] < b[k])
			return -1;
		if (a[k] > b[k])
			return 1;
	}
	return 0;
}

#endif /* PARAPET_LIB_IMAGE_READ_H */
