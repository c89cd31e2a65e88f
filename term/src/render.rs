//! Drawing a [`Terminal`]'s cells as XRGB8888 pixels (`0x00RRGGBB`).
//!
//! The font is Noto Sans Mono from the `noto-sans-mono-bitmap` crate:
//! pre-rasterized, regular weight, 16 pixels a line, Basic Latin (a
//! character outside it is drawn as `?`). Its pixels are intensities
//! (anti-aliased), given more contrast and blended here between a cell's foreground and background
//! colour; an intensity of 255 is exactly the foreground. The blends of
//! the last few colour pairs are kept as tables of 256 (a pixel is a
//! lookup: 4,322 instructions a character before, 2,471 after, icount). A cell is
//! [`GLYPH_WIDTH`] × [`GLYPH_HEIGHT`] pixels times an integer scale.
//!
//! A [`Surface`] takes spans of pixels, a row at a time, so the same code
//! draws into a host-side [`PixelBuffer`] (the tests) and into a
//! Framebuffer session's buffer (the terminal component).
//! [`Renderer::render`] draws only what changed ([`crate::Damage`]): a
//! scroll is a move of the pixels ([`Surface::move_up`]) and the new
//! bottom lines, not a redraw of every cell; it returns the rectangle
//! changed, in pixels: the rectangle to refresh.
//!
//! **Invariants.** Nothing is written outside the surface: the grid a
//! renderer makes for a surface ([`Renderer::grid_size`]) fits in it, and
//! spans are clipped to the surface's size all the same. Rendering
//! allocates one row of scratch pixels, at most the surface's width, and
//! at most four blend tables of 1 KiB.

use alloc::vec;
use alloc::vec::Vec;

use noto_sans_mono_bitmap::{get_raster, get_raster_width, FontWeight, RasterHeight};

use crate::terminal::{Cell, Colour, Rect, Terminal};

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
    /// Moves the `rows` pixel rows from `from` up to `to` (`to < from`),
    /// whole rows; `false` if the surface cannot (the renderer then
    /// draws everything instead).
    fn move_up(&mut self, from: u32, to: u32, rows: u32) -> bool {
        let _ = (from, to, rows);
        false
    }
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

    fn move_up(&mut self, from: u32, to: u32, rows: u32) -> bool {
        let w = self.width as usize;
        let (from, to, rows) = (from as usize, to as usize, rows as usize);
        if to >= from || from + rows > self.height as usize {
            return false;
        }
        self.pixels.copy_within(from * w..(from + rows) * w, to * w);
        true
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

/// The smallest rectangle holding `a` and `b`.
fn union(a: PixelRect, b: PixelRect) -> PixelRect {
    let (x, y) = (a.x.min(b.x), a.y.min(b.y));
    let right = (a.x + a.w).max(b.x + b.w);
    let bottom = (a.y + a.h).max(b.y + b.h);
    PixelRect {
        x,
        y,
        w: right - x,
        h: bottom - y,
    }
}

/// Draws cells; see the module doc.
#[derive(Clone, Debug)]
pub struct Renderer {
    palette: Palette,
    scale: u32,
    scratch: Vec<u32>,
    /// The blends of the colour pairs drawn last (at most [`RAMPS`]),
    /// `next_ramp` the one to replace next.
    ramps: Vec<Ramp>,
    next_ramp: usize,
}

/// Colour pairs whose blends a renderer keeps: a terminal line has a
/// label and a text colour, and a few more come and go.
const RAMPS: usize = 4;

/// Every blend of a colour pair: `table[a]` is the foreground over the
/// background at the font's intensity `a`, with more contrast
/// (`blend(fg, bg, contrast(a))`) — made once per pair, so a pixel is a
/// table lookup instead of a blend per channel.
#[derive(Clone, Debug)]
struct Ramp {
    fg: u32,
    bg: u32,
    table: [u32; 256],
}

impl Ramp {
    fn new(fg: u32, bg: u32) -> Ramp {
        let mut table = [0; 256];
        for (a, t) in table.iter_mut().enumerate() {
            *t = blend(fg, bg, contrast(a as u8));
        }
        Ramp { fg, bg, table }
    }
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
            ramps: Vec::new(),
            next_ramp: 0,
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

    /// Draws what changed in the terminal into `surface` and clears it: a
    /// scroll as a move of the pixels (when the surface can), then the
    /// dirty cells. The rectangle changed, clipped to the surface, if any.
    pub fn render(&mut self, term: &mut Terminal, surface: &mut impl Surface) -> Option<PixelRect> {
        let damage = term.take_damage();
        let (cols, rows) = term.size();
        let whole = Rect {
            col: 0,
            row: 0,
            cols,
            rows,
        };
        let mut moved = None;
        let mut rect = damage.rect;
        if damage.scrolled > 0 && !damage.all {
            // Rows of pixels: the grid's, within the surface.
            let (_, ch) = self.cell_size();
            let height = (rows as u32).saturating_mul(ch).min(surface.size().1);
            let by = (damage.scrolled as u32).saturating_mul(ch);
            if by < height && surface.move_up(by, 0, height - by) {
                moved = self.pixels(whole, surface.size());
            } else {
                rect = Some(whole);
            }
        }
        if damage.all {
            rect = Some(whole);
        }
        let drawn = rect.and_then(|r| self.draw(term, r, surface));
        match (moved, drawn) {
            (Some(m), Some(d)) => Some(union(m, d)),
            (m, d) => m.or(d),
        }
    }

    /// The pixels of `rect`, clipped to a surface of `size`; `None` if
    /// none is on it.
    fn pixels(&self, rect: Rect, (sw, sh): (u32, u32)) -> Option<PixelRect> {
        let (cw, ch) = self.cell_size();
        let x = u32::try_from(rect.col).ok()?.checked_mul(cw)?;
        let y = u32::try_from(rect.row).ok()?.checked_mul(ch)?;
        if x >= sw || y >= sh || rect.cols == 0 || rect.rows == 0 {
            return None;
        }
        let w = u32::try_from(rect.cols)
            .ok()?
            .saturating_mul(cw)
            .min(sw - x);
        let h = u32::try_from(rect.rows)
            .ok()?
            .saturating_mul(ch)
            .min(sh - y);
        Some(PixelRect { x, y, w, h })
    }

    /// Draws the cells of `rect`; the pixels drawn.
    fn draw(
        &mut self,
        term: &Terminal,
        rect: Rect,
        surface: &mut impl Surface,
    ) -> Option<PixelRect> {
        let p = self.pixels(rect, surface.size())?;
        let (cw, ch) = self.cell_size();
        self.scratch.clear();
        self.scratch.resize(p.w as usize, self.palette.bg);
        for y in p.y..p.y + p.h {
            let row = (y / ch) as usize;
            let gy = ((y % ch) / self.scale) as usize;
            for px in (0..p.w).step_by(cw as usize) {
                let col = ((p.x + px) / cw) as usize;
                let end = (px + cw).min(p.w);
                self.glyph_row(term.cell(row, col), gy, px as usize..end as usize);
            }
            surface.write_span(p.x, y, &self.scratch);
        }
        Some(p)
    }

    /// Row `gy` of `cell`'s glyph into `scratch[span]`.
    fn glyph_row(&mut self, cell: Cell, gy: usize, span: core::ops::Range<usize>) {
        let fg = self.palette.rgb(cell.fg);
        let bg = self.palette.rgb(cell.bg);
        let raster = match cell.ch {
            ' ' => None,
            ch => get_raster(ch, FontWeight::Regular, RasterHeight::Size16)
                .or_else(|| get_raster('?', FontWeight::Regular, RasterHeight::Size16)),
        };
        let Some(raster) = raster else {
            self.scratch[span].fill(bg);
            return;
        };
        let scale = self.scale as usize;
        let ramp = match self.ramps.iter().position(|r| (r.fg, r.bg) == (fg, bg)) {
            Some(i) => i,
            None if self.ramps.len() < RAMPS => {
                self.ramps.push(Ramp::new(fg, bg));
                self.ramps.len() - 1
            }
            None => {
                let i = self.next_ramp;
                self.ramps[i] = Ramp::new(fg, bg);
                self.next_ramp = (i + 1) % RAMPS;
                i
            }
        };
        let table = &self.ramps[ramp].table;
        let out = &mut self.scratch[span];
        // The glyph's row `gy`, each intensity `scale` times; past it
        // (never, for a span inside the cell), background.
        let w = raster.width();
        let row = raster.pixels().get(gy * w..(gy + 1) * w).unwrap_or(&[]);
        let drawn = match scale {
            1 => out
                .iter_mut()
                .zip(row)
                .map(|(p, &a)| *p = table[usize::from(a)])
                .count(),
            _ => out
                .iter_mut()
                .zip(row.iter().flat_map(|&a| core::iter::repeat_n(a, scale)))
                .map(|(p, a)| *p = table[usize::from(a)])
                .count(),
        };
        out[drawn..].fill(table[0]);
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
    fn more_colour_pairs_than_kept_blends() {
        // Eight foregrounds on two backgrounds, drawn twice (the second
        // time every pair's blend was replaced meanwhile): every pixel is
        // the blend of its cell's pair, as without the kept blends.
        let mut r = Renderer::new(Palette::VGA, 1);
        let mut t = Terminal::new(16, 2, 0);
        let mut buf = PixelBuffer::new(112, 32, 0);
        for round in 0..2 {
            t.feed(b"\x1b[H");
            for bg in [40, 44] {
                for fg in 30..38 {
                    t.feed(alloc::format!("\x1b[{fg};{bg}mW").as_bytes());
                }
            }
            t.damage_all();
            r.render(&mut t, &mut buf);
            let w = get_raster('W', FontWeight::Regular, RasterHeight::Size16).unwrap();
            for col in 0..16u32 {
                let fg = Palette::VGA.colours[(col % 8) as usize];
                let bg = Palette::VGA.colours[if col < 8 { 0 } else { 4 }];
                for y in 0..16 {
                    for x in 0..7 {
                        let want = blend(fg, bg, contrast(w.pixel(x, y).unwrap()));
                        let got = buf.at(col * 7 + x as u32, y as u32);
                        assert_eq!(got, want, "round {round}, cell {col}, pixel {x},{y}");
                    }
                }
            }
        }
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

    /// A surface that cannot move pixels: the renderer draws everything.
    struct NoMove(PixelBuffer);

    impl Surface for NoMove {
        fn size(&self) -> (u32, u32) {
            self.0.size()
        }
        fn write_span(&mut self, x: u32, y: u32, pixels: &[u32]) {
            self.0.write_span(x, y, pixels)
        }
    }

    #[test]
    fn scrolling_moves_pixels() {
        // Scrolled by moving pixels, and by drawing everything: the same
        // picture as a fresh terminal with the same lines.
        let mut r = Renderer::new(Palette::VGA, 1);
        let (mut moved, mut drawn) = (Terminal::new(5, 3, 0), Terminal::new(5, 3, 0));
        let mut a = PixelBuffer::new(37, 50, 0x123456);
        let mut b = NoMove(PixelBuffer::new(37, 50, 0x123456));
        for line in [&b"\x1b[31mab"[..], b"cd\n", b"\x1b[32mef\n", b"gh\nij\nkl"] {
            moved.feed(line);
            drawn.feed(line);
            let ra = r.render(&mut moved, &mut a);
            let rb = r.render(&mut drawn, &mut b);
            if line == b"gh\nij\nkl" {
                // Two lines scrolled: the grid's pixels changed.
                assert_eq!(
                    ra,
                    Some(PixelRect {
                        x: 0,
                        y: 0,
                        w: 35,
                        h: 48
                    })
                );
                assert_eq!(ra, rb);
            }
        }
        let mut fresh = Terminal::new(5, 3, 0);
        fresh.feed(b"\x1b[32mgh\nij\nkl");
        let mut c = PixelBuffer::new(37, 50, 0x123456);
        r.render(&mut fresh, &mut c);
        assert!(a == c, "moved pixels differ from a fresh drawing");
        assert!(b.0 == c, "redrawn pixels differ from a fresh drawing");
        // One line scrolled, nothing else written: the move and the new
        // bottom line are the grid.
        moved.feed(b"\n");
        assert_eq!(
            r.render(&mut moved, &mut a),
            Some(PixelRect {
                x: 0,
                y: 0,
                w: 35,
                h: 48
            })
        );
        assert_eq!(a.at(36, 49), 0x123456, "outside the grid untouched");
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
