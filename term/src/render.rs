//! Drawing a [`Terminal`]'s cells as XRGB8888 pixels (`0x00RRGGBB`).
//!
//! The font is Noto Sans Mono from the `noto-sans-mono-bitmap` crate:
//! pre-rasterized, regular weight, 16 pixels a line, Basic Latin (a
//! character outside it is drawn as `?`). Its pixels are intensities
//! (anti-aliased), given more contrast and blended here between a cell's foreground and background
//! colour; an intensity of 255 is exactly the foreground. A cell is
//! [`GLYPH_WIDTH`] × [`GLYPH_HEIGHT`] pixels times an integer scale.
//!
//! A [`Surface`] takes spans of pixels, a row at a time, so the same code
//! draws into a host-side [`PixelBuffer`] (the tests) and into a
//! Framebuffer session's buffer (the terminal component).
//! [`Renderer::render`] draws only the terminal's dirty rectangle and
//! returns it in pixels: the rectangle to refresh.
//!
//! **Invariants.** Nothing is written outside the surface: the grid a
//! renderer makes for a surface ([`Renderer::grid_size`]) fits in it, and
//! spans are clipped to the surface's size all the same. Rendering
//! allocates one row of scratch pixels, at most the surface's width.

use alloc::vec;
use alloc::vec::Vec;

use noto_sans_mono_bitmap::{get_raster, get_raster_width, FontWeight, RasterHeight};

use crate::terminal::{Cell, Colour, Terminal};

/// The font's line height in pixels (scale 1).
pub const GLYPH_HEIGHT: u32 = RasterHeight::Size16.val() as u32;
/// The font's advance in pixels (scale 1).
pub const GLYPH_WIDTH: u32 = get_raster_width(FontWeight::Regular, RasterHeight::Size16) as u32;
/// The largest scale.
pub const MAX_SCALE: u32 = 4;

/// Where pixels go.
pub trait Surface {
    /// Width and height in pixels.
    fn size(&self) -> (u32, u32);
    /// Writes `pixels` to row `y` from column `x` (the caller keeps
    /// inside; an implementation drops what is not).
    fn write_span(&mut self, x: u32, y: u32, pixels: &[u32]);
}

/// A surface in memory: `width` × `height` pixels, row after row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PixelBuffer {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// The pixels, `width` a row.
    pub pixels: Vec<u32>,
}

impl PixelBuffer {
    /// A buffer of `width` × `height` pixels of `colour`.
    pub fn new(width: u32, height: u32, colour: u32) -> Self {
        PixelBuffer {
            width,
            height,
            pixels: vec![colour; width as usize * height as usize],
        }
    }

    /// The pixel at `x`, `y`.
    pub fn at(&self, x: u32, y: u32) -> u32 {
        self.pixels[y as usize * self.width as usize + x as usize]
    }
}

impl Surface for PixelBuffer {
    fn size(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    fn write_span(&mut self, x: u32, y: u32, pixels: &[u32]) {
        if y >= self.height || x >= self.width {
            return;
        }
        let n = pixels.len().min((self.width - x) as usize);
        let start = y as usize * self.width as usize + x as usize;
        self.pixels[start..start + n].copy_from_slice(&pixels[..n]);
    }
}

/// The colours, `0x00RRGGBB`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Palette {
    /// Black, red, green, yellow, blue, magenta, cyan, white, then the
    /// bright ones.
    pub colours: [u32; 16],
    /// Text in the default colour.
    pub fg: u32,
    /// Bold text in the default colour.
    pub bright_fg: u32,
    /// The background.
    pub bg: u32,
}

impl Palette {
    /// The VGA text-mode colours, light grey on black.
    pub const VGA: Palette = Palette {
        colours: [
            0x00_00_00, 0xaa_00_00, 0x00_aa_00, 0xaa_55_00, 0x00_00_aa, 0xaa_00_aa, 0x00_aa_aa,
            0xaa_aa_aa, 0x55_55_55, 0xff_55_55, 0x55_ff_55, 0xff_ff_55, 0x55_55_ff, 0xff_55_ff,
            0x55_ff_ff, 0xff_ff_ff,
        ],
        fg: 0xaa_aa_aa,
        bright_fg: 0xff_ff_ff,
        bg: 0x00_00_00,
    };

    /// The pixel value of `colour`.
    pub fn rgb(&self, colour: Colour) -> u32 {
        match colour {
            Colour::DefaultFg => self.fg,
            Colour::DefaultBg => self.bg,
            Colour::BrightFg => self.bright_fg,
            Colour::Indexed(n) => self.colours[usize::from(n & 15)],
        }
    }
}

/// A rectangle of pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PixelRect {
    /// Left.
    pub x: u32,
    /// Top.
    pub y: u32,
    /// Width.
    pub w: u32,
    /// Height.
    pub h: u32,
}

/// Draws cells; see the module doc.
#[derive(Clone, Debug)]
pub struct Renderer {
    palette: Palette,
    scale: u32,
    scratch: Vec<u32>,
}

/// The font's intensity `a` with more contrast: 16 and below is
/// background, 192 and above solid foreground, linear between. At 16
/// pixels Noto's stems are mostly 200–235 of 255 (faint on a dark
/// background); this draws them solid and keeps the anti-aliased edges.
fn contrast(a: u8) -> u8 {
    match a {
        0..=16 => 0,
        192..=255 => 255,
        _ => ((u32::from(a) - 16) * 255 / 176) as u8,
    }
}

/// `fg` over `bg` at intensity `a` (0..=255), per channel.
fn blend(fg: u32, bg: u32, a: u8) -> u32 {
    match a {
        0 => bg,
        255 => fg,
        _ => {
            let a = u32::from(a);
            let mut out = 0;
            for shift in [0, 8, 16] {
                let f = (fg >> shift) & 0xff;
                let b = (bg >> shift) & 0xff;
                out |= ((f * a + b * (255 - a) + 127) / 255) << shift;
            }
            out
        }
    }
}

impl Renderer {
    /// A renderer with `palette`, glyphs `scale` times their size (1 to
    /// [`MAX_SCALE`]; clamped).
    pub fn new(palette: Palette, scale: u32) -> Self {
        Renderer {
            palette,
            scale: scale.clamp(1, MAX_SCALE),
            scratch: Vec::new(),
        }
    }

    /// A cell's width and height in pixels.
    pub fn cell_size(&self) -> (u32, u32) {
        (GLYPH_WIDTH * self.scale, GLYPH_HEIGHT * self.scale)
    }

    /// The columns and rows of cells that fit in `width` × `height`
    /// pixels (at least 1 each, the grid a [`Terminal`] needs; a surface
    /// smaller than a cell shows part of it).
    pub fn grid_size(&self, width: u32, height: u32) -> (usize, usize) {
        let (cw, ch) = self.cell_size();
        (
            ((width / cw).max(1)) as usize,
            ((height / ch).max(1)) as usize,
        )
    }

    /// Fills all of `surface` with the background; the rectangle to
    /// refresh (all of it).
    pub fn clear(&mut self, surface: &mut impl Surface) -> PixelRect {
        let (w, h) = surface.size();
        self.scratch.clear();
        self.scratch.resize(w as usize, self.palette.bg);
        for y in 0..h {
            surface.write_span(0, y, &self.scratch);
        }
        PixelRect { x: 0, y: 0, w, h }
    }

    /// Draws the terminal's dirty cells into `surface` and clears them;
    /// the rectangle drawn, clipped to the surface, if any.
    pub fn render(&mut self, term: &mut Terminal, surface: &mut impl Surface) -> Option<PixelRect> {
        let dirty = term.take_dirty()?;
        let (sw, sh) = surface.size();
        let (cw, ch) = self.cell_size();
        let x0 = u32::try_from(dirty.col).ok()?.checked_mul(cw)?;
        let y0 = u32::try_from(dirty.row).ok()?.checked_mul(ch)?;
        if x0 >= sw || y0 >= sh {
            return None;
        }
        let w = (dirty.cols as u32 * cw).min(sw - x0);
        let h = (dirty.rows as u32 * ch).min(sh - y0);
        self.scratch.clear();
        self.scratch.resize(w as usize, self.palette.bg);
        for py in 0..h {
            let y = y0 + py;
            let row = (y / ch) as usize;
            let gy = ((y % ch) / self.scale) as usize;
            for px in (0..w).step_by(cw as usize) {
                let col = ((x0 + px) / cw) as usize;
                let cell = term.cell(row, col);
                let end = (px + cw).min(w);
                self.glyph_row(cell, gy, px as usize..end as usize);
            }
            surface.write_span(x0, y, &self.scratch);
        }
        Some(PixelRect { x: x0, y: y0, w, h })
    }

    /// Row `gy` of `cell`'s glyph into `scratch[span]`.
    fn glyph_row(&mut self, cell: Cell, gy: usize, span: core::ops::Range<usize>) {
        let fg = self.palette.rgb(cell.fg);
        let bg = self.palette.rgb(cell.bg);
        let out = &mut self.scratch[span];
        if cell.ch == ' ' {
            out.fill(bg);
            return;
        }
        let raster = get_raster(cell.ch, FontWeight::Regular, RasterHeight::Size16)
            .or_else(|| get_raster('?', FontWeight::Regular, RasterHeight::Size16));
        let Some(raster) = raster else {
            out.fill(bg);
            return;
        };
        let scale = self.scale as usize;
        for (i, p) in out.iter_mut().enumerate() {
            *p = blend(fg, bg, contrast(raster.pixel(i / scale, gy).unwrap_or(0)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FG: u32 = Palette::VGA.fg;
    const BG: u32 = Palette::VGA.bg;

    /// The pixels of cell `row`, `col` that are exactly `colour`.
    fn count(buf: &PixelBuffer, r: &Renderer, row: u32, col: u32, colour: u32) -> usize {
        let (cw, ch) = r.cell_size();
        (0..ch)
            .flat_map(|y| (0..cw).map(move |x| (col * cw + x, row * ch + y)))
            .filter(|&(x, y)| buf.at(x, y) == colour)
            .count()
    }

    #[test]
    fn font_metrics() {
        assert_eq!((GLYPH_WIDTH, GLYPH_HEIGHT), (7, 16));
        let r = Renderer::new(Palette::VGA, 1);
        // 1024x768: 146 columns, 48 rows.
        assert_eq!(r.grid_size(1024, 768), (146, 48));
        assert_eq!(
            Renderer::new(Palette::VGA, 2).grid_size(1024, 768),
            (73, 24)
        );
        assert_eq!(r.grid_size(3, 3), (1, 1));
    }

    #[test]
    fn a_glyph_matches_the_font() {
        let mut r = Renderer::new(Palette::VGA, 1);
        let mut t = Terminal::new(4, 2, 0);
        let mut buf = PixelBuffer::new(28, 32, 0x123456);
        r.clear(&mut buf);
        t.feed(b"A");
        let rect = r.render(&mut t, &mut buf);
        assert_eq!(
            rect,
            Some(PixelRect {
                x: 0,
                y: 0,
                w: 28,
                h: 32
            })
        );
        let a = get_raster('A', FontWeight::Regular, RasterHeight::Size16).unwrap();
        for y in 0..16 {
            for x in 0..7 {
                let want = blend(FG, BG, contrast(a.pixel(x, y).unwrap()));
                assert_eq!(buf.at(x as u32, y as u32), want, "pixel {x},{y}");
            }
        }
        // The glyph has solid pixels in the text colour and background.
        assert!(count(&buf, &r, 0, 0, FG) >= 8);
        assert!(count(&buf, &r, 0, 0, BG) >= 40);
        // The other cells are background.
        assert_eq!(count(&buf, &r, 0, 1, BG), 7 * 16);
        assert_eq!(count(&buf, &r, 1, 0, BG), 7 * 16);
    }

    #[test]
    fn colours_scale_and_dirty_only() {
        let mut r = Renderer::new(Palette::VGA, 2);
        let mut t = Terminal::new(4, 2, 0);
        let mut buf = PixelBuffer::new(60, 70, 0x123456);
        r.render(&mut t, &mut buf);
        // The margin right and below the grid is not the terminal's.
        assert_eq!(buf.at(59, 0), 0x123456);
        assert_eq!(buf.at(0, 69), 0x123456);
        t.feed(b"\n\x1b[C\x1b[41;93mH");
        let rect = r.render(&mut t, &mut buf).unwrap();
        assert_eq!(
            rect,
            PixelRect {
                x: 14,
                y: 32,
                w: 14,
                h: 32
            }
        );
        let (red, yellow) = (Palette::VGA.colours[1], Palette::VGA.colours[11]);
        assert!(count(&buf, &r, 1, 1, yellow) >= 4 * 8);
        assert!(count(&buf, &r, 1, 1, red) >= 4 * 40);
        assert_eq!(count(&buf, &r, 1, 1, BG), 0);
        // Nothing dirty: nothing drawn.
        assert_eq!(r.render(&mut t, &mut buf), None);
    }

    #[test]
    fn unknown_characters_and_clipping() {
        let mut r = Renderer::new(Palette::VGA, 1);
        // A grid larger than the surface: clipped, no panic.
        let mut t = Terminal::new(10, 10, 0);
        let mut buf = PixelBuffer::new(20, 20, 0);
        t.feed("é€\u{FFFD}".as_bytes());
        let rect = r.render(&mut t, &mut buf).unwrap();
        assert_eq!(
            rect,
            PixelRect {
                x: 0,
                y: 0,
                w: 20,
                h: 20
            }
        );
        let q = get_raster('?', FontWeight::Regular, RasterHeight::Size16).unwrap();
        let want: Vec<u32> = (0..7)
            .map(|x| blend(FG, BG, contrast(q.pixel(x, 5).unwrap())))
            .collect();
        let got: Vec<u32> = (0..7).map(|x| buf.at(x, 5)).collect();
        assert_eq!(got, want, "é is drawn as ?");
        // Dirty cells wholly off the surface: nothing.
        t.feed(b"\x1b[9;9Hx");
        assert_eq!(r.render(&mut t, &mut buf), None);
    }

    #[test]
    fn blending() {
        assert_eq!(blend(0xffffff, 0, 255), 0xffffff);
        assert_eq!(blend(0xffffff, 0, 0), 0);
        assert_eq!(blend(0xff0000, 0x0000ff, 128), 0x80007f);
        assert_eq!([contrast(10), contrast(100), contrast(200)], [0, 121, 255]);
    }
}
