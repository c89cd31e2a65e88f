//! A terminal as pure logic, for the terminal component
//! (`components/apps/terminal`, docs/display.md) and host tests:
//!
//! - [`ansi`]: the escape-sequence parser (bytes in, actions out; fixed
//!   size, no input panics it or grows it);
//! - [`terminal`]: the text grid the actions change — cursor, colours,
//!   wrap, scrolling, a bounded scrollback — and the dirty rectangle;
//! - [`render`]: the dirty cells drawn as XRGB8888 pixels with Noto Sans
//!   Mono (`noto-sans-mono-bitmap`) into any [`render::Surface`].
//!
//! `no_std` with `alloc`, no `unsafe`, no hardware: it builds for the
//! host and for `x86_64-unknown-none`.
//!
//! Why `noto-sans-mono-bitmap` 0.4 and not `font8x8` 0.3: it is kept up
//! (0.4.0 of 2025, a Rust version it names), its glyphs are anti-aliased
//! (a byte of intensity a pixel) and 7×16 at the smallest size — the
//! proportions of a terminal font — while `font8x8`'s are 8×8 bits, too
//! small on a 1024×768 screen without doubling, and it has not changed
//! since 2020. With only the regular weight, 16 pixels and Basic Latin
//! enabled, its data is about 10 KiB.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod ansi;
pub mod render;
pub mod terminal;

pub use render::{Palette, PixelBuffer, PixelRect, Renderer, Surface};
pub use terminal::{Cell, Colour, Controls, Damage, Rect, Terminal};

#[cfg(test)]
mod fuzz {
    //! Random bytes, and random bytes rich in escape sequences, through
    //! the terminal and the renderer: no panic, the cursor inside the
    //! screen, the scrollback within its bound, every drawn pixel inside.
    use super::*;

    use formats::test_rng::Rng;

    /// Bytes that reach every state of the parser often.
    const INTERESTING: &[u8] = b"\x1b[;:?<0123456789mHJKABCDf\x07\x18\x1a\x1b]P\\\r\n\t\x08\x7f\xc3\xe2\x82\xf0\x9f\x80\xffaZ ";

    #[test]
    fn random_input_is_harmless() {
        let mut rng = Rng(0x5eed_1234_abcd_ef01);
        for round in 0..400 {
            let (cols, rows) = (
                1 + (rng.next() % 40) as usize,
                1 + (rng.next() % 12) as usize,
            );
            let mut t = Terminal::new(cols, rows, (rng.next() % 5) as usize);
            if round % 2 == 1 {
                t.set_controls(Controls::ColoursOnly);
            }
            let mut r = Renderer::new(Palette::VGA, 1 + (rng.next() % 2) as u32);
            let (cw, ch) = r.cell_size();
            // Sometimes a surface smaller than the grid.
            let (w, h) = (cols as u32 * cw - (rng.next() % 9) as u32, rows as u32 * ch);
            let mut buf = PixelBuffer::new(w, h, 0);
            for _ in 0..20 {
                let bytes: alloc::vec::Vec<u8> = (0..rng.next() % 300)
                    .map(|_| {
                        let x = rng.next();
                        if x.is_multiple_of(3) {
                            (x >> 8) as u8
                        } else {
                            INTERESTING[(x >> 8) as usize % INTERESTING.len()]
                        }
                    })
                    .collect();
                t.feed(&bytes);
                let (row, col) = t.cursor();
                assert!(
                    row < rows && col < cols,
                    "cursor {row},{col} in {cols}x{rows}"
                );
                assert!(t.scrollback_len() <= 4);
                if let Some(p) = r.render(&mut t, &mut buf) {
                    assert!(p.x + p.w <= w && p.y + p.h <= h, "{p:?} in {w}x{h}");
                }
                if rng.next().is_multiple_of(4) {
                    t.scroll_view((rng.next() % 7) as isize - 3);
                }
            }
            assert_eq!(buf.pixels.len(), (w * h) as usize);
        }
    }

    #[test]
    fn a_huge_line_wraps_and_scrolls_within_bounds() {
        let mut t = Terminal::new(80, 25, 100);
        let line = alloc::vec![b'x'; 1 << 20];
        t.feed(&line);
        assert_eq!(t.scrollback_len(), 100);
        // Half a megabyte of one unterminated sequence changes nothing.
        let mut t = Terminal::new(80, 25, 100);
        let mut csi = alloc::vec![b'1'; 1 << 19];
        csi.splice(0..0, *b"\x1b[");
        t.feed(&csi);
        t.take_dirty();
        t.feed(b"m");
        assert_eq!(t.take_dirty(), None);
        assert_eq!(t.cursor(), (0, 0));
    }
}
