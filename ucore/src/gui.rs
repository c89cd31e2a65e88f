//! The GUI multiplexer's pure logic (`components/services/gui`, Genode's
//! nitpicker as the model): views on one screen, each a title bar the
//! multiplexer draws and a content area its client draws, stacked; the
//! pointer and the cursor sprite drawn at it, above every view; which
//! view has the focus (keyboard input goes there alone); and what a
//! refresh of a rectangle must draw, view by view.
//!
//! Invariants: every view lies within the screen (a configured view
//! that does not is clipped, one that is left empty refused); the
//! stacking order is a permutation of the views; the pointer stays on
//! the screen, and the cursor's rectangle ([`Layout::cursor`]) with it;
//! the focus is a view or none. Nothing here panics on any input
//! (coordinates are clamped, sizes saturate).

use alloc::string::String;
use alloc::vec::Vec;

/// Rows of a view's title bar.
pub const TITLE_HEIGHT: u32 = 16;

/// The cursor sprite's width and height: its tip, the pointer's
/// position, is its top-left pixel.
pub const CURSOR_W: u32 = 12;
pub const CURSOR_H: u32 = 19;
/// The cursor's outline and fill: black around white shows on any
/// background a client may draw.
pub const CURSOR_OUTLINE: u32 = 0x00_00_00;
pub const CURSOR_FILL: u32 = 0xff_ff_ff;

/// The arrow, a row a line: `B` outline, `W` fill, `.` transparent (the
/// screen below shows).
pub const CURSOR: [&[u8; CURSOR_W as usize]; CURSOR_H as usize] = [
    b"B...........",
    b"BB..........",
    b"BWB.........",
    b"BWWB........",
    b"BWWWB.......",
    b"BWWWWB......",
    b"BWWWWWB.....",
    b"BWWWWWWB....",
    b"BWWWWWWWB...",
    b"BWWWWWWWWB..",
    b"BWWWWWWWWWB.",
    b"BWWWWWWBBBBB",
    b"BWWWBWWB....",
    b"BWWBBWWB....",
    b"BWB..BWWB...",
    b"BB...BWWB...",
    b"B.....BWWB..",
    b"......BWWB..",
    b".......BB...",
];

/// The cursor's colour at `(dx, dy)` of its sprite; `None` where it is
/// transparent or outside it.
pub fn cursor_pixel(dx: u32, dy: u32) -> Option<u32> {
    let row = CURSOR.get(dy as usize)?;
    match row.get(dx as usize)? {
        b'B' => Some(CURSOR_OUTLINE),
        b'W' => Some(CURSOR_FILL),
        _ => None,
    }
}

/// What a pointer motion must redraw, the cursor having been at `old`
/// and now at `new`: the old place (the screen below comes back) and the
/// new (the cursor drawn there). One rectangle, the two's bounding box,
/// when they overlap — a small motion, the usual case: one redraw and one
/// refresh at the driver instead of two — else both; empty ones left
/// out. Nothing when the cursor did not move.
pub fn cursor_damage(old: Rect, new: Rect) -> impl Iterator<Item = Rect> {
    let both = if old == new {
        [Rect::default(), Rect::default()]
    } else if old.is_empty() || new.is_empty() || old.intersect(&new).is_empty() {
        [old, new]
    } else {
        [old.bounding(&new), Rect::default()]
    };
    both.into_iter().filter(|r| !r.is_empty())
}

/// A rectangle of the screen (pixels; `w` or `h` 0: empty).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rect {
    pub x: u32,
    pub y: u32,
    pub w: u32,
    pub h: u32,
}

impl Rect {
    pub const fn new(x: u32, y: u32, w: u32, h: u32) -> Rect {
        Rect { x, y, w, h }
    }

    /// Its end column and row (exclusive), saturating.
    pub fn end(&self) -> (u32, u32) {
        (self.x.saturating_add(self.w), self.y.saturating_add(self.h))
    }

    pub fn is_empty(&self) -> bool {
        self.w == 0 || self.h == 0
    }

    /// The part of both, possibly empty.
    pub fn intersect(&self, o: &Rect) -> Rect {
        let (x0, y0) = (self.x.max(o.x), self.y.max(o.y));
        let ((ax, ay), (bx, by)) = (self.end(), o.end());
        let (x1, y1) = (ax.min(bx), ay.min(by));
        if x1 <= x0 || y1 <= y0 {
            return Rect::default();
        }
        Rect::new(x0, y0, x1 - x0, y1 - y0)
    }

    pub fn contains(&self, x: u32, y: u32) -> bool {
        let (ex, ey) = self.end();
        x >= self.x && x < ex && y >= self.y && y < ey
    }

    /// The least rectangle holding both (saturating at the screen's
    /// coordinate range).
    pub fn bounding(&self, o: &Rect) -> Rect {
        let (x0, y0) = (self.x.min(o.x), self.y.min(o.y));
        let ((ax, ay), (bx, by)) = (self.end(), o.end());
        Rect::new(x0, y0, ax.max(bx) - x0, ay.max(by) - y0)
    }
}

/// One view: its client's label, where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    /// The client's label (its name in the scenario, given by init: no
    /// client can choose another's), shown in the title bar.
    pub label: String,
    /// The whole view, title bar included.
    pub outer: Rect,
}

impl View {
    /// The title bar.
    pub fn title(&self) -> Rect {
        Rect::new(
            self.outer.x,
            self.outer.y,
            self.outer.w,
            self.outer.h.min(TITLE_HEIGHT),
        )
    }

    /// What its client draws.
    pub fn content(&self) -> Rect {
        let t = self.outer.h.min(TITLE_HEIGHT);
        Rect::new(
            self.outer.x,
            self.outer.y + t,
            self.outer.w,
            self.outer.h - t,
        )
    }
}

/// The spans of a row no view covers ([`Layout::background_spans`]).
#[derive(Clone, Debug)]
pub struct BackgroundSpans {
    /// The views' parts of the row, `(from, to)` by `from`.
    covered: [(u32, u32); MAX_VIEWS],
    n: usize,
    next: usize,
    /// Where the next span may start; the row's end.
    x: u32,
    end: u32,
}

impl Iterator for BackgroundSpans {
    type Item = (u32, u32);

    fn next(&mut self) -> Option<(u32, u32)> {
        while self.next < self.n {
            let (from, to) = self.covered[self.next];
            self.next += 1;
            let at = self.x;
            self.x = self.x.max(to);
            if from > at {
                return Some((at, from - at));
            }
        }
        (self.x < self.end).then(|| {
            let span = (self.x, self.end - self.x);
            self.x = self.end;
            span
        })
    }
}

/// Why a view was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// Off the screen, or no room for content below its title.
    Empty,
    /// Another view has that label.
    Duplicate,
    /// No room for more views.
    Full,
}

/// The most views.
pub const MAX_VIEWS: usize = 8;

/// Views, their stacking, the pointer and the focus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    screen: Rect,
    views: Vec<View>,
    /// View indices, bottom first.
    order: Vec<usize>,
    focus: Option<usize>,
    pointer: (u32, u32),
}

impl Layout {
    /// An empty screen of `w` × `h`, the pointer in its middle.
    pub fn new(w: u32, h: u32) -> Layout {
        Layout {
            screen: Rect::new(0, 0, w, h),
            views: Vec::new(),
            order: Vec::new(),
            focus: None,
            pointer: (w / 2, h / 2),
        }
    }

    /// The screen.
    pub fn screen(&self) -> Rect {
        self.screen
    }

    /// The parts of row `y` of `r` that no view covers, `(x, w)` left to
    /// right: where a redraw fills the background (a view is opaque, its
    /// title bar and content covering its whole outer rectangle). None
    /// when `y` is outside `r`. No allocation: a redraw asks for every
    /// row.
    pub fn background_spans(&self, r: &Rect, y: u32) -> BackgroundSpans {
        let mut spans = BackgroundSpans {
            covered: [(0, 0); MAX_VIEWS],
            n: 0,
            next: 0,
            x: r.x,
            end: r.x,
        };
        if r.is_empty() || y < r.y || y - r.y >= r.h {
            return spans;
        }
        spans.end = r.x + r.w;
        for v in &self.views {
            let o = v.outer.intersect(r);
            if o.is_empty() || y < o.y || y - o.y >= o.h || spans.n == MAX_VIEWS {
                continue;
            }
            // Insertion by start: at most MAX_VIEWS of them.
            let mut i = spans.n;
            while i > 0 && spans.covered[i - 1].0 > o.x {
                spans.covered[i] = spans.covered[i - 1];
                i -= 1;
            }
            spans.covered[i] = (o.x, o.x + o.w);
            spans.n += 1;
        }
        spans
    }

    /// Adds a view on top (clipped to the screen); the first view added
    /// has the focus. Its index.
    pub fn add(&mut self, label: &str, outer: Rect) -> Result<usize, LayoutError> {
        let outer = outer.intersect(&self.screen);
        if outer.h <= TITLE_HEIGHT || outer.w == 0 {
            return Err(LayoutError::Empty);
        }
        if self.views.iter().any(|v| v.label == label) {
            return Err(LayoutError::Duplicate);
        }
        if self.views.len() == MAX_VIEWS {
            return Err(LayoutError::Full);
        }
        self.views.push(View {
            label: label.into(),
            outer,
        });
        let i = self.views.len() - 1;
        self.order.push(i);
        self.focus.get_or_insert(i);
        Ok(i)
    }

    /// The view of `label`.
    pub fn view_of(&self, label: &str) -> Option<usize> {
        self.views.iter().position(|v| v.label == label)
    }

    pub fn view(&self, i: usize) -> Option<&View> {
        self.views.get(i)
    }

    /// The views, bottom first.
    pub fn stacking(&self) -> impl Iterator<Item = (usize, &View)> {
        self.order.iter().map(|&i| (i, &self.views[i]))
    }

    pub fn focus(&self) -> Option<usize> {
        self.focus
    }

    pub fn pointer(&self) -> (u32, u32) {
        self.pointer
    }

    /// Where the cursor is drawn: its sprite with the tip at the pointer,
    /// clipped to the screen (near the right or bottom edge only part of
    /// it shows).
    pub fn cursor(&self) -> Rect {
        let (x, y) = self.pointer;
        Rect::new(x, y, CURSOR_W, CURSOR_H).intersect(&self.screen)
    }

    /// The topmost view under the point, if any.
    pub fn at(&self, x: u32, y: u32) -> Option<usize> {
        self.order
            .iter()
            .rev()
            .copied()
            .find(|&i| self.views[i].outer.contains(x, y))
    }

    /// Moves the pointer by `dx`, `dy`, staying on the screen.
    pub fn move_pointer(&mut self, dx: i32, dy: i32) {
        let clamp = |v: u32, d: i32, size: u32| -> u32 {
            let v = i64::from(v) + i64::from(d);
            v.clamp(0, i64::from(size.saturating_sub(1))) as u32
        };
        self.pointer = (
            clamp(self.pointer.0, dx, self.screen.w),
            clamp(self.pointer.1, dy, self.screen.h),
        );
    }

    /// Puts the pointer at a tablet's absolute position `x`, `y` (each on
    /// a scale of `0..2^15`, `interfaces::input::Event::Absolute`), scaled
    /// to the screen (`x * width / 2^15`: on the screen whatever the
    /// value); the motion it made (new less old), for clients that know
    /// relative motion only.
    pub fn place_pointer(&mut self, x: u16, y: u16) -> (i32, i32) {
        let scale = |v: u16, size: u32| -> u32 {
            let v = (u64::from(v) * u64::from(size)) >> 15;
            (v as u32).min(size.saturating_sub(1))
        };
        let old = self.pointer;
        self.pointer = (scale(x, self.screen.w), scale(y, self.screen.h));
        (
            self.pointer.0 as i32 - old.0 as i32,
            self.pointer.1 as i32 - old.1 as i32,
        )
    }

    /// A click: the view under the pointer gets the focus and goes on
    /// top. The views whose look changed (title colour, stacking), for
    /// a redraw: the old focus and the new.
    pub fn click(&mut self) -> Vec<usize> {
        let Some(i) = self.at(self.pointer.0, self.pointer.1) else {
            return Vec::new();
        };
        self.order.retain(|&v| v != i);
        self.order.push(i);
        self.set_focus(i)
    }

    /// The focus key: the next view (in the order they were added) gets
    /// the focus. The views whose look changed.
    pub fn cycle_focus(&mut self) -> Vec<usize> {
        if self.views.is_empty() {
            return Vec::new();
        }
        let next = self.focus.map_or(0, |f| (f + 1) % self.views.len());
        self.set_focus(next)
    }

    fn set_focus(&mut self, i: usize) -> Vec<usize> {
        let old = self.focus.replace(i);
        let mut changed: Vec<usize> = old.into_iter().collect();
        if old != Some(i) || changed.is_empty() {
            changed.push(i);
        }
        changed.dedup();
        changed
    }
}

/// The part of `screen_rect` that view `v`'s client asked to refresh
/// with `x, y, w, h` in its own coordinates (clipped to its content).
pub fn client_rect(v: &View, x: u64, y: u64, w: u64, h: u64) -> Rect {
    let c = v.content();
    let clip = |a: u64| u32::try_from(a).unwrap_or(u32::MAX);
    let (x, y, w, h) = (clip(x), clip(y), clip(w), clip(h));
    let asked = Rect::new(c.x.saturating_add(x), c.y.saturating_add(y), w, h);
    asked.intersect(&c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pseudo-random numbers below `n` (xorshift from `seed`).
    fn below(mut seed: u64) -> impl FnMut(u32) -> u32 {
        move |n| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % u64::from(n)) as u32
        }
    }

    fn two() -> Layout {
        let mut l = Layout::new(1024, 768);
        assert_eq!(l.add("a", Rect::new(0, 0, 512, 384)), Ok(0));
        assert_eq!(l.add("b", Rect::new(512, 0, 512, 384)), Ok(1));
        l
    }

    #[test]
    fn background_is_what_no_view_covers() {
        let mut l = two();
        assert_eq!(l.add("c", Rect::new(100, 300, 100, 200)), Ok(2));
        let screen = l.screen();
        // Beside and below the two views, around the third.
        assert_eq!(l.background_spans(&screen, 10).count(), 0);
        assert_eq!(
            l.background_spans(&screen, 400).collect::<Vec<_>>(),
            alloc::vec![(0, 100), (200, 824)]
        );
        assert_eq!(
            l.background_spans(&screen, 600).collect::<Vec<_>>(),
            alloc::vec![(0, 1024)]
        );
        let r = Rect::new(150, 390, 100, 20);
        assert_eq!(
            l.background_spans(&r, 395).collect::<Vec<_>>(),
            alloc::vec![(200, 50)]
        );
        assert_eq!(l.background_spans(&r, 389).count(), 0);
        assert_eq!(l.background_spans(&r, 410).count(), 0);
        // Every pixel of random rectangles: background exactly where no
        // view's outer rectangle is.
        let mut next = below(0x9e37_79b9_7f4a_7c15u64);
        for _ in 0..200 {
            let r = Rect::new(next(1100), next(800), next(600), next(400)).intersect(&screen);
            let y = r.y + next(r.h.max(1));
            let spans: Vec<_> = l.background_spans(&r, y).collect();
            for px in r.x..r.x + r.w {
                let in_span = spans.iter().any(|&(s, w)| px >= s && px < s + w);
                let covered = l.stacking().any(|(_, v)| v.outer.contains(px, y));
                assert_eq!(in_span, !covered && !r.is_empty(), "{r:?} row {y} x {px}");
            }
        }
    }

    #[test]
    fn cursor_sprite() {
        // Tip at the top-left; outline down the left edge; fill inside.
        assert_eq!(cursor_pixel(0, 0), Some(CURSOR_OUTLINE));
        assert_eq!(cursor_pixel(1, 0), None);
        assert_eq!(cursor_pixel(1, 5), Some(CURSOR_FILL));
        assert_eq!(cursor_pixel(0, CURSOR_H - 1), None);
        assert_eq!(cursor_pixel(CURSOR_W, 0), None);
        assert_eq!(cursor_pixel(0, CURSOR_H), None);
        assert_eq!(cursor_pixel(u32::MAX, u32::MAX), None);
        // Every row uses the whole width's worth of known characters, and
        // every fill pixel is enclosed: its left and right neighbours on
        // the row are fill or outline, never transparent.
        for (y, row) in CURSOR.iter().enumerate() {
            assert!(row.iter().all(|c| b"BW.".contains(c)), "row {y}");
            for x in 0..CURSOR_W {
                if cursor_pixel(x, y as u32) == Some(CURSOR_FILL) {
                    assert!(cursor_pixel(x - 1, y as u32).is_some(), "{x},{y}");
                    assert!(cursor_pixel(x + 1, y as u32).is_some(), "{x},{y}");
                }
            }
        }
    }

    #[test]
    fn cursor_follows_the_pointer_clipped() {
        let mut l = Layout::new(1024, 768);
        assert_eq!(l.cursor(), Rect::new(512, 384, CURSOR_W, CURSOR_H));
        l.move_pointer(i32::MAX, i32::MAX);
        assert_eq!(l.cursor(), Rect::new(1023, 767, 1, 1));
        l.move_pointer(-5, -10);
        assert_eq!(l.cursor(), Rect::new(1018, 757, 6, 11));
        l.move_pointer(i32::MIN, i32::MIN);
        assert_eq!(l.cursor(), Rect::new(0, 0, CURSOR_W, CURSOR_H));
    }

    #[test]
    fn an_absolute_position_is_scaled_to_the_screen() {
        let mut l = Layout::new(1024, 768);
        assert_eq!(l.place_pointer(0x2000, 0x4000), (256 - 512, 384 - 384));
        assert_eq!(l.pointer(), (256, 384));
        assert_eq!(l.place_pointer(0x7fff, 0x7fff), (1023 - 256, 767 - 384));
        assert_eq!(l.place_pointer(u16::MAX, u16::MAX), (0, 0));
        assert_eq!(l.pointer(), (1023, 767));
        assert_eq!(l.place_pointer(0, 0), (-1023, -767));
        assert_eq!(l.cursor(), Rect::new(0, 0, CURSOR_W, CURSOR_H));
    }

    #[test]
    fn cursor_damage_covers_old_and_new_places() {
        let at = |x, y| Rect::new(x, y, CURSOR_W, CURSOR_H);
        let damage = |a, b| cursor_damage(a, b).collect::<Vec<_>>();
        assert_eq!(damage(at(10, 10), at(10, 10)), []);
        // Overlapping: one rectangle, the bounding box.
        assert_eq!(damage(at(10, 10), at(13, 8)), [Rect::new(10, 8, 15, 21)]);
        // Apart: both.
        assert_eq!(damage(at(10, 10), at(300, 10)), [at(10, 10), at(300, 10)]);
        assert_eq!(damage(Rect::default(), at(1, 1)), [at(1, 1)]);
        // Every pixel of either place is redrawn, for random motions.
        let mut next = below(0x2545_f491_4f6c_dd1du64);
        for _ in 0..500 {
            let (a, b) = (at(next(100), next(100)), at(next(100), next(100)));
            let rects = damage(a, b);
            assert!(rects.len() <= 2);
            for r in [a, b] {
                for py in r.y..r.y + r.h {
                    for px in r.x..r.x + r.w {
                        let hit = rects.iter().any(|d| d.contains(px, py));
                        assert!(hit || a == b, "{a:?} -> {b:?}: {px},{py}");
                    }
                }
            }
        }
    }

    #[test]
    fn rects() {
        let a = Rect::new(10, 10, 100, 50);
        assert_eq!(
            a.intersect(&Rect::new(50, 0, 100, 20)),
            Rect::new(50, 10, 60, 10)
        );
        assert!(a.intersect(&Rect::new(110, 10, 5, 5)).is_empty());
        assert!(a.contains(10, 59) && !a.contains(110, 10));
        let far = Rect::new(u32::MAX - 1, u32::MAX - 1, u32::MAX, u32::MAX);
        assert_eq!(far.end(), (u32::MAX, u32::MAX));
        assert!(far.intersect(&a).is_empty());
        assert_eq!(
            a.bounding(&Rect::new(5, 40, 10, 30)),
            Rect::new(5, 10, 105, 60)
        );
        assert_eq!(
            far.bounding(&a),
            Rect::new(10, 10, u32::MAX - 10, u32::MAX - 10)
        );
    }

    #[test]
    fn views_are_clipped_and_checked() {
        let mut l = two();
        assert_eq!(
            l.add("a", Rect::new(0, 400, 10, 100)),
            Err(LayoutError::Duplicate)
        );
        assert_eq!(
            l.add("c", Rect::new(2000, 0, 10, 100)),
            Err(LayoutError::Empty)
        );
        assert_eq!(
            l.add("d", Rect::new(0, 760, 100, 100)),
            Err(LayoutError::Empty)
        );
        assert_eq!(l.add("e", Rect::new(1000, 700, 100, 100)), Ok(2));
        assert_eq!(l.view(2).unwrap().outer, Rect::new(1000, 700, 24, 68));
        let v = l.view(0).unwrap();
        assert_eq!(v.title(), Rect::new(0, 0, 512, TITLE_HEIGHT));
        assert_eq!(
            v.content(),
            Rect::new(0, TITLE_HEIGHT, 512, 384 - TITLE_HEIGHT)
        );
        for i in 3..MAX_VIEWS {
            let label = alloc::format!("v{i}");
            assert!(l.add(&label, Rect::new(0, 400, 50, 50)).is_ok());
        }
        assert_eq!(
            l.add("x", Rect::new(0, 400, 50, 50)),
            Err(LayoutError::Full)
        );
    }

    #[test]
    fn focus_by_key_and_click() {
        let mut l = two();
        assert_eq!(l.focus(), Some(0));
        assert_eq!(l.cycle_focus(), [0, 1]);
        assert_eq!(l.focus(), Some(1));
        assert_eq!(l.cycle_focus(), [1, 0]);
        // The pointer starts in the middle (512, 384): below both views.
        assert_eq!(l.click(), Vec::<usize>::new());
        l.move_pointer(100, -200);
        assert_eq!(l.at(612, 184), Some(1));
        assert_eq!(l.click(), [0, 1]);
        assert_eq!(l.focus(), Some(1));
        // Clamped at the edges.
        l.move_pointer(i32::MIN, i32::MAX);
        assert_eq!(l.pointer(), (0, 767));
    }

    #[test]
    fn stacking_follows_clicks() {
        let mut l = Layout::new(800, 600);
        l.add("under", Rect::new(0, 0, 400, 300)).unwrap();
        l.add("over", Rect::new(200, 100, 400, 300)).unwrap();
        assert_eq!(l.at(300, 200), Some(1));
        l.move_pointer(-350, -250); // (50, 50): only "under"
        l.click();
        assert_eq!(l.at(300, 200), Some(0));
        let order: Vec<_> = l.stacking().map(|(i, _)| i).collect();
        assert_eq!(order, [1, 0]);
    }

    #[test]
    fn client_rects_stay_in_their_view() {
        let l = two();
        let v = l.view(1).unwrap();
        let c = v.content();
        assert_eq!(client_rect(v, 0, 0, 10, 10), Rect::new(c.x, c.y, 10, 10));
        assert_eq!(client_rect(v, 0, 0, u64::MAX, u64::MAX), c);
        assert!(client_rect(v, 600, 0, 10, 10).is_empty());
        assert!(client_rect(v, u64::MAX, u64::MAX, 1, 1).is_empty());
    }
}
