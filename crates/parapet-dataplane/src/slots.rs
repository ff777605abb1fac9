//! The classifier images' slots: writing the inactive one, the generation
//! flip that makes it live, and reading the live one back.
//!
//! There is one image per place a chain is enforced (`abi::IMAGES`): image
//! 0 for XDP and tc, images 1..3 for the INPUT, FORWARD and OUTPUT
//! netfilter hooks ([`NfHook::image`](crate::NfHook::image)), two slots
//! each, and one generation for all of them: a swap makes every hook's
//! new image live at once. An image not rewritten since the last swap is
//! carried forward (copied into its inactive slot) so the flip keeps it.
//!
//! What the dataplane checks of an image before writing it: the format is
//! owned by `parapet-image` (`docs/image-format.md`); these are its header
//! checks, with the dataplane's error. The full structural validation is
//! `parapet_image::Image`; callers should hand [`Dataplane::write_image`]
//! images that passed it. The BPF walker does not trust the image either
//! way: every read is bounds checked and every loop is capped, so a bad
//! image costs a fallback, never safety.

use crate::abi::{IMAGE_PAGE_BYTES, MAX_SET_REFS};
use crate::error::{BadImage, Error, Result};
use crate::load::Dataplane;

/// The checks that need no knowledge of the regions: magic, version,
/// length and checksum ([`parapet_image::check_header`]). Catches
/// truncation and corruption in transit.
pub fn check_header(bytes: &[u8]) -> std::result::Result<(), BadImage> {
    parapet_image::words_of_bytes(bytes)
        .and_then(|w| parapet_image::check_header(&w))
        .map_err(|e| BadImage(e.0))
}

impl Dataplane {
    /// Bytes an image slot holds.
    pub fn slot_capacity(&self) -> usize {
        self.slot_pages as usize * IMAGE_PAGE_BYTES
    }

    /// The live generation: 0 before the first swap, otherwise slot
    /// `generation & 1` is live.
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// Write a classifier image (`docs/image-format.md`) into the inactive
    /// slot. Packets keep using the live slot until [`Dataplane::swap`]. A
    /// failed write changes nothing that packets see. The header, length and
    /// checksum are checked here; the structure should have been validated
    /// by `parapet_image::Image` (the BPF walker survives a bad image but
    /// then falls back to the interim classifier, see [`Stat::ImageError`](crate::Stat::ImageError)).
    pub fn write_image(&mut self, image: &[u8]) -> Result<()> {
        check_header(image)?;
        self.write_image_unchecked(image)
    }

    /// [`Dataplane::write_image`] without the header checks: for tests and
    /// for exercising the walker's own defences.
    pub fn write_image_unchecked(&mut self, image: &[u8]) -> Result<()> {
        self.write_image_at(0, image)
    }

    /// [`Dataplane::write_image`] for the image of a netfilter hook: it
    /// goes live with the next [`Dataplane::swap`], together with every
    /// other image written since the last one.
    pub fn write_hook_image(&mut self, hook: crate::NfHook, image: &[u8]) -> Result<()> {
        check_header(image)?;
        self.write_image_at(hook.image(), image)
    }

    /// Whether the netfilter hooks' images exist (not
    /// [`Features::interface_only`](crate::Features::interface_only)).
    pub fn hook_images(&self) -> bool {
        self.images > 1
    }

    fn write_image_at(&mut self, which: u32, image: &[u8]) -> Result<()> {
        if which >= self.images {
            return Err(Error::Missing(
                "hook image (left out at load: Features::interface_only)",
            ));
        }
        if image.len() > self.slot_capacity() {
            return Err(Error::ImageTooLarge {
                len: image.len(),
                cap: self.slot_capacity(),
            });
        }
        let slot = 2 * which + (self.generation.wrapping_add(1) & 1);
        let base = slot * self.slot_pages;
        for (i, chunk) in image.chunks(IMAGE_PAGE_BYTES).enumerate() {
            let mut page = [0u8; IMAGE_PAGE_BYTES];
            page[..chunk.len()].copy_from_slice(chunk);
            self.image.set(base + i as u32, page, 0)?;
        }
        self.image_pages.staged[which as usize] = Some(image.len().div_ceil(IMAGE_PAGE_BYTES));
        self.staged = true;
        Ok(())
    }

    /// Copy the live slot of every image not written since the last swap
    /// into its inactive slot, so the flip keeps it.
    fn carry_forward(&mut self) -> Result<()> {
        let live = self.generation & 1;
        for which in 0..self.images {
            let w = which as usize;
            if self.image_pages.staged[w].is_some() {
                continue;
            }
            let pages = self.image_pages.live[w] as u32;
            let (from, to) = (2 * which + live, 2 * which + (live ^ 1));
            for p in 0..pages {
                let page = self.image.get(&(from * self.slot_pages + p), 0)?;
                self.image.set(to * self.slot_pages + p, page, 0)?;
            }
            self.image_pages.staged[w] = Some(self.image_pages.live[w]);
        }
        Ok(())
    }

    /// Make the last written image live by storing generation + 1: a single
    /// u32 write, so each packet sees the old image or the new one, never a
    /// mix. Returns the new generation once no packet can still be walking
    /// the old image (an RCU grace period, a few milliseconds), so the next
    /// [`Dataplane::write_image`] may safely overwrite it.
    pub fn swap(&mut self) -> Result<u32> {
        if !self.staged {
            return Err(Error::NothingToSwap);
        }
        if self.generation != 0 {
            self.carry_forward()?;
        }
        let next = self.generation.wrapping_add(1).max(1);
        // The image's set references go live with it: write them into the
        // inactive slot's half of the reference table first.
        let slot = (self.generation.wrapping_add(1) & 1) * MAX_SET_REFS;
        for (i, r) in self.staged_refs.iter().enumerate() {
            self.set_refs.set(slot + i as u32, *r, 0)?;
        }
        self.gen.set(0, next, 0)?;
        self.generation = next;
        self.live_refs.clone_from(&self.staged_refs);
        self.staged = false;
        for w in 0..self.images as usize {
            if let Some(n) = self.image_pages.staged[w].take() {
                self.image_pages.live[w] = n;
            }
        }
        // Any update of a map-in-map waits for synchronize_rcu() in the
        // kernel; XDP and tc programs run inside RCU read-side sections.
        self.rcu_barrier.set(0, &self.gen, 0)?;
        Ok(next)
    }

    /// Forget a written but not swapped image and its staged set
    /// references: the next swap needs a new [`Dataplane::write_image`], and
    /// sets only the staged references used become unused.
    pub fn unstage(&mut self) {
        self.staged = false;
        self.image_pages.staged = Default::default();
        self.staged_refs.clone_from(&self.live_refs);
    }

    /// Read back `len` bytes of the live image (for tests and diagnostics).
    pub fn read_live_image(&self, len: usize) -> Result<Vec<u8>> {
        self.read_live_image_at(0, len)
    }

    /// [`Dataplane::read_live_image`] of a netfilter hook's image.
    pub fn read_live_hook_image(&self, hook: crate::NfHook, len: usize) -> Result<Vec<u8>> {
        self.read_live_image_at(hook.image(), len)
    }

    fn read_live_image_at(&self, which: u32, len: usize) -> Result<Vec<u8>> {
        if which >= self.images {
            return Err(Error::Missing("image"));
        }
        let slot = 2 * which + (self.generation & 1);
        let mut out = Vec::with_capacity(len);
        let mut page_no = slot * self.slot_pages;
        while out.len() < len.min(self.slot_capacity()) {
            let page = self.image.get(&page_no, 0)?;
            let n = (len - out.len()).min(IMAGE_PAGE_BYTES);
            out.extend_from_slice(&page[..n]);
            page_no += 1;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parapet_image::{checksum, hw, HEADER_WORDS, MAGIC, VERSION};

    #[test]
    fn header_checks_catch_corruption() {
        let mut w = vec![0u32; HEADER_WORDS];
        w[hw::MAGIC] = MAGIC;
        w[hw::VERSION] = VERSION;
        w[hw::TOTAL_WORDS] = HEADER_WORDS as u32;
        w[hw::CHECKSUM] = checksum(&w);
        let bytes: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(check_header(&bytes), Ok(()));
        let mut bad = bytes.clone();
        bad[100] ^= 1;
        assert!(check_header(&bad).is_err());
        assert!(check_header(&bytes[..bytes.len() - 4]).is_err());
        assert!(check_header(&bytes[..bytes.len() - 1]).is_err());
    }
}
