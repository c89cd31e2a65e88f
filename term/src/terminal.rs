//! The text grid: cells with colours, a cursor, line wrap, scrolling, a
//! bounded scrollback, and the dirty rectangle since the last render.
//!
//! [`Terminal::feed`] runs bytes through the [`Parser`] and applies its
//! actions:
//!
//! - printable characters are written at the cursor in the current pen
//!   (colours); at the right margin the cursor waits ("pending wrap", as
//!   on a VT100) and the next character goes to the start of the next
//!   line;
//! - CR, LF (which also returns the carriage: there is no tty layer that
//!   would add the CR, so LF is a new line), BS, TAB (stops every 8
//!   columns) move the cursor; other controls are dropped;
//! - SGR (`ESC [ ... m`) sets the pen: 0 reset, 1 bold (shown as the
//!   bright colour), 22 normal, 7/27 inverse, 30–37/40–47 and 90–97/
//!   100–107 the 16 colours, 39/49 the defaults, `38;5;n`/`48;5;n` for
//!   n < 16 (other extended colours are skipped whole);
//! - with [`Controls::Full`] also cursor movement (CUU, CUD, CUF, CUB,
//!   CUP/HVP) and erasing (ED, EL); with [`Controls::ColoursOnly`] (what
//!   the terminal component uses for Log lines, whose writers must not
//!   move over each other's lines) those are dropped, and so are CR and BS.
//!
//! A line that scrolls off the top goes to the scrollback, which keeps the
//! last `scrollback` lines ([`Terminal::new`]); [`Terminal::scroll_view`]
//! shows older lines, new output returns the view to the bottom.
//!
//! **Invariants.** The screen is always `rows` lines of `cols` cells
//! (both at least 1), the cursor inside it; the scrollback never holds more
//! than its limit; memory is fixed at creation plus the scrollback, so
//! no input grows it past that. The [`Damage`] since
//! [`Terminal::take_damage`] says what changed: the screen moved up by
//! `scrolled` lines, then the cells of `rect` changed (on the moved
//! screen) — or, with `all`, everything.

use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;

use crate::ansi::{Action, Csi, Parser};

/// A colour of a cell: one of the 16 of the palette, or a default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Colour {
    /// The default foreground (text) colour.
    DefaultFg,
    /// The default background colour.
    DefaultBg,
    /// The bright default foreground (bold text in the default colour).
    BrightFg,
    /// Palette entry 0..=15: black, red, green, yellow, blue, magenta,
    /// cyan, white, then their bright variants.
    Indexed(u8),
}

/// One character cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    /// The character.
    pub ch: char,
    /// Its colour.
    pub fg: Colour,
    /// The cell's background.
    pub bg: Colour,
}

impl Cell {
    /// A space in the default colours.
    pub const BLANK: Cell = Cell {
        ch: ' ',
        fg: Colour::DefaultFg,
        bg: Colour::DefaultBg,
    };
}

/// Which control functions a terminal obeys (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Controls {
    /// Everything this terminal knows.
    Full,
    /// Printing, LF, TAB and SGR colours only.
    ColoursOnly,
}

/// A rectangle of cells: columns `col..col + cols`, rows `row..row + rows`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect {
    /// The first column.
    pub col: usize,
    /// The first row.
    pub row: usize,
    /// How many columns.
    pub cols: usize,
    /// How many rows.
    pub rows: usize,
}

impl Rect {
    fn union(self, o: Rect) -> Rect {
        let col = self.col.min(o.col);
        let row = self.row.min(o.row);
        let end_col = (self.col + self.cols).max(o.col + o.cols);
        let end_row = (self.row + self.rows).max(o.row + o.rows);
        Rect {
            col,
            row,
            cols: end_col - col,
            rows: end_row - row,
        }
    }
}

/// What changed since the last [`Terminal::take_damage`]: applied in
/// this order, the old picture becomes the new one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Damage {
    /// Everything changed (the other fields then say nothing).
    pub all: bool,
    /// The screen moved up by this many lines (fewer than its rows).
    pub scrolled: usize,
    /// Then these cells changed.
    pub rect: Option<Rect>,
}

/// The colours new characters get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pen {
    fg: Colour,
    bg: Colour,
    bold: bool,
    inverse: bool,
}

impl Pen {
    const DEFAULT: Pen = Pen {
        fg: Colour::DefaultFg,
        bg: Colour::DefaultBg,
        bold: false,
        inverse: false,
    };

    /// The cell colours for a character.
    fn colours(&self) -> (Colour, Colour) {
        let fg = match (self.fg, self.bold) {
            (Colour::Indexed(n), true) if n < 8 => Colour::Indexed(n + 8),
            (Colour::DefaultFg, true) => Colour::BrightFg,
            (c, _) => c,
        };
        if self.inverse {
            (self.bg, fg)
        } else {
            (fg, self.bg)
        }
    }
}

/// The terminal; see the module doc.
#[derive(Clone, Debug)]
pub struct Terminal {
    cols: usize,
    rows: usize,
    /// The screen, top line first, each `cols` cells.
    screen: VecDeque<Vec<Cell>>,
    /// Lines scrolled off the top, oldest first.
    scrollback: VecDeque<Vec<Cell>>,
    max_scrollback: usize,
    /// How many lines back into the scrollback the view shows.
    view: usize,
    row: usize,
    col: usize,
    pending_wrap: bool,
    pen: Pen,
    controls: Controls,
    parser: Parser,
    damage: Damage,
}

impl Terminal {
    /// A blank terminal of `cols` × `rows` cells (each at least 1)
    /// keeping `scrollback` lines that scroll off; the whole screen dirty.
    pub fn new(cols: usize, rows: usize, scrollback: usize) -> Self {
        let (cols, rows) = (cols.max(1), rows.max(1));
        Terminal {
            cols,
            rows,
            screen: (0..rows).map(|_| vec![Cell::BLANK; cols]).collect(),
            scrollback: VecDeque::new(),
            max_scrollback: scrollback,
            view: 0,
            row: 0,
            col: 0,
            pending_wrap: false,
            pen: Pen::DEFAULT,
            controls: Controls::Full,
            parser: Parser::new(),
            damage: Damage {
                all: true,
                scrolled: 0,
                rect: Some(Rect {
                    col: 0,
                    row: 0,
                    cols,
                    rows,
                }),
            },
        }
    }

    /// Columns and rows.
    pub fn size(&self) -> (usize, usize) {
        (self.cols, self.rows)
    }

    /// The cursor: row, column.
    pub fn cursor(&self) -> (usize, usize) {
        (self.row, self.col)
    }

    /// Which controls are obeyed from now on.
    pub fn set_controls(&mut self, controls: Controls) {
        self.controls = controls;
    }

    /// Drops a half-parsed sequence and resets the pen to the defaults:
    /// what one writer's bytes set ends here.
    pub fn reset_state(&mut self) {
        self.parser.reset();
        self.pen = Pen::DEFAULT;
    }

    /// Feeds bytes (see the module doc).
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.view != 0 {
            self.view = 0;
            self.mark_all();
        }
        // The parser is taken out so that its actions can change `self`.
        let mut parser = core::mem::take(&mut self.parser);
        parser.feed(bytes, |action| self.act(action));
        self.parser = parser;
    }

    /// Prints `text` as it is, in the current pen, without parsing it:
    /// a control character is shown as `?` (for text that is not a
    /// client's, such as the label of a Log line).
    pub fn print_plain(&mut self, text: &str) {
        if self.view != 0 {
            self.view = 0;
            self.mark_all();
        }
        for c in text.chars() {
            self.print(if c.is_control() { '?' } else { c });
        }
    }

    /// Starts a new line: the carriage returned, the cursor a line down
    /// (scrolling at the bottom).
    pub fn newline(&mut self) {
        self.col = 0;
        self.pending_wrap = false;
        self.line_feed();
    }

    /// Whether the cursor is at the start of a line.
    pub fn at_line_start(&self) -> bool {
        self.col == 0 && !self.pending_wrap
    }

    /// The visible cell at `row`, `col` (the screen, or the scrollback
    /// when the view is scrolled back); a blank outside.
    pub fn cell(&self, row: usize, col: usize) -> Cell {
        let line = if self.view == 0 {
            self.screen.get(row)
        } else {
            // Line `i` of scrollback-then-screen is at the view's top row.
            let i = self.scrollback.len() - self.view + row;
            match i.checked_sub(self.scrollback.len()) {
                None => self.scrollback.get(i),
                Some(s) => self.screen.get(s),
            }
        };
        line.and_then(|l| l.get(col))
            .copied()
            .unwrap_or(Cell::BLANK)
    }

    /// How many lines the scrollback holds.
    pub fn scrollback_len(&self) -> usize {
        self.scrollback.len()
    }

    /// How many lines back the view is (0: the live screen).
    pub fn view(&self) -> usize {
        self.view
    }

    /// Moves the view `lines` back (positive) or forward (negative),
    /// within the scrollback.
    pub fn scroll_view(&mut self, lines: isize) {
        let view = self
            .view
            .saturating_add_signed(lines)
            .min(self.scrollback.len());
        if view != self.view {
            self.view = view;
            self.mark_all();
        }
    }

    /// The rectangle changed since the last call, if any (all of the
    /// screen if it scrolled); clears it.
    pub fn take_dirty(&mut self) -> Option<Rect> {
        let d = self.take_damage();
        if d.all || d.scrolled > 0 {
            Some(self.whole())
        } else {
            d.rect
        }
    }

    /// What changed since the last call (see [`Damage`]); clears it.
    pub fn take_damage(&mut self) -> Damage {
        core::mem::take(&mut self.damage)
    }

    fn whole(&self) -> Rect {
        Rect {
            col: 0,
            row: 0,
            cols: self.cols,
            rows: self.rows,
        }
    }

    fn mark(&mut self, rect: Rect) {
        let d = &mut self.damage;
        d.rect = Some(match d.rect {
            Some(r) => r.union(rect),
            None => rect,
        });
    }

    /// Marks every cell changed: the next render draws the whole grid
    /// (a surface that lost its pixels, a terminal whose screen was
    /// reconnected).
    pub fn damage_all(&mut self) {
        self.mark_all();
    }

    fn mark_all(&mut self) {
        self.damage = Damage {
            all: true,
            scrolled: 0,
            rect: Some(self.whole()),
        };
    }

    /// The screen moved up a line: what was dirty moves with it (the top
    /// line's part gone), the new bottom line is dirty.
    fn mark_scrolled(&mut self) {
        let d = &mut self.damage;
        if d.all || d.scrolled + 1 >= self.rows {
            self.mark_all();
            return;
        }
        d.scrolled += 1;
        d.rect = d.rect.and_then(|r| match r.row {
            0 if r.rows > 1 => Some(Rect {
                rows: r.rows - 1,
                ..r
            }),
            0 => None,
            row => Some(Rect { row: row - 1, ..r }),
        });
        self.mark(Rect {
            col: 0,
            row: self.rows - 1,
            cols: self.cols,
            rows: 1,
        });
    }

    fn act(&mut self, action: Action<'_>) {
        match action {
            Action::Print(c) => self.print(c),
            Action::Control(b) => self.control(b),
            Action::Csi(csi) => self.csi(csi),
        }
    }

    fn print(&mut self, ch: char) {
        if self.pending_wrap {
            self.newline();
        }
        let (fg, bg) = self.pen.colours();
        self.screen[self.row][self.col] = Cell { ch, fg, bg };
        self.mark(Rect {
            col: self.col,
            row: self.row,
            cols: 1,
            rows: 1,
        });
        if self.col + 1 == self.cols {
            self.pending_wrap = true;
        } else {
            self.col += 1;
        }
    }

    fn control(&mut self, byte: u8) {
        let full = self.controls == Controls::Full;
        match byte {
            b'\n' | 0x0b | 0x0c => self.newline(),
            b'\t' => {
                let stop = (self.col / 8 + 1) * 8;
                self.col = stop.min(self.cols - 1);
                self.pending_wrap = false;
            }
            b'\r' if full => {
                self.col = 0;
                self.pending_wrap = false;
            }
            0x08 if full => {
                self.col = self.col.saturating_sub(1);
                self.pending_wrap = false;
            }
            _ => {}
        }
    }

    fn line_feed(&mut self) {
        if self.row + 1 < self.rows {
            self.row += 1;
            return;
        }
        // Scroll: the top line to the scrollback, a blank one at the bottom.
        let top = self.screen.pop_front().unwrap_or_default();
        if self.max_scrollback > 0 {
            if self.scrollback.len() == self.max_scrollback {
                self.scrollback.pop_front();
            }
            self.scrollback.push_back(top);
        }
        self.screen.push_back(vec![Cell::BLANK; self.cols]);
        self.mark_scrolled();
    }

    fn csi(&mut self, csi: &Csi) {
        if csi.intermediate || csi.private.is_some() {
            return;
        }
        if csi.final_byte == b'm' {
            self.sgr(csi.params());
            return;
        }
        if self.controls != Controls::Full {
            return;
        }
        let n = usize::from(csi.param_or(0, 1));
        match csi.final_byte {
            b'A' => self.move_to(self.row.saturating_sub(n), self.col),
            b'B' => self.move_to(self.row.saturating_add(n), self.col),
            b'C' => self.move_to(self.row, self.col.saturating_add(n)),
            b'D' => self.move_to(self.row, self.col.saturating_sub(n)),
            b'H' | b'f' => {
                let col = usize::from(csi.param_or(1, 1));
                self.move_to(n - 1, col - 1);
            }
            b'J' => self.erase_display(csi.param_or(0, 0)),
            b'K' => self.erase_line(csi.param_or(0, 0)),
            _ => {}
        }
    }

    fn move_to(&mut self, row: usize, col: usize) {
        self.row = row.min(self.rows - 1);
        self.col = col.min(self.cols - 1);
        self.pending_wrap = false;
    }

    /// Blanks columns `from..to` of screen line `row` (in the pen's
    /// background, as terminals do).
    fn blank(&mut self, row: usize, from: usize, to: usize) {
        let cell = Cell {
            ch: ' ',
            fg: Colour::DefaultFg,
            bg: self.pen.colours().1,
        };
        let to = to.min(self.cols);
        if from >= to {
            return;
        }
        self.screen[row][from..to].fill(cell);
        self.mark(Rect {
            col: from,
            row,
            cols: to - from,
            rows: 1,
        });
    }

    fn erase_line(&mut self, mode: u16) {
        let (row, col) = (self.row, self.col);
        match mode {
            0 => self.blank(row, col, self.cols),
            1 => self.blank(row, 0, col + 1),
            2 => self.blank(row, 0, self.cols),
            _ => {}
        }
    }

    fn erase_display(&mut self, mode: u16) {
        let (row, col) = (self.row, self.col);
        let rows = match mode {
            0 => {
                self.blank(row, col, self.cols);
                row + 1..self.rows
            }
            1 => {
                self.blank(row, 0, col + 1);
                0..row
            }
            2 => 0..self.rows,
            _ => 0..0,
        };
        for r in rows {
            self.blank(r, 0, self.cols);
        }
    }

    fn sgr(&mut self, params: &[u16]) {
        if params.is_empty() {
            self.pen = Pen::DEFAULT;
            return;
        }
        let mut i = 0;
        while i < params.len() {
            let p = params[i];
            i += 1;
            match p {
                0 => self.pen = Pen::DEFAULT,
                1 => self.pen.bold = true,
                22 => self.pen.bold = false,
                7 => self.pen.inverse = true,
                27 => self.pen.inverse = false,
                30..=37 => self.pen.fg = Colour::Indexed((p - 30) as u8),
                39 => self.pen.fg = Colour::DefaultFg,
                40..=47 => self.pen.bg = Colour::Indexed((p - 40) as u8),
                49 => self.pen.bg = Colour::DefaultBg,
                90..=97 => self.pen.fg = Colour::Indexed((p - 90) as u8 + 8),
                100..=107 => self.pen.bg = Colour::Indexed((p - 100) as u8 + 8),
                38 | 48 => {
                    // Extended colour: `5;n` (256 colours) or `2;r;g;b`.
                    let colour = match params.get(i) {
                        Some(5) => {
                            let n = params.get(i + 1).copied();
                            i += 2;
                            n.filter(|&n| n < 16).map(|n| Colour::Indexed(n as u8))
                        }
                        Some(2) => {
                            i += 4;
                            None
                        }
                        _ => None,
                    };
                    if let Some(c) = colour {
                        if p == 38 {
                            self.pen.fg = c;
                        } else {
                            self.pen.bg = c;
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;

    fn rect(col: usize, row: usize, cols: usize, rows: usize) -> Option<Rect> {
        Some(Rect {
            col,
            row,
            cols,
            rows,
        })
    }

    fn line(t: &Terminal, row: usize) -> String {
        let (cols, _) = t.size();
        let s: String = (0..cols).map(|c| t.cell(row, c).ch).collect();
        String::from(s.trim_end())
    }

    #[test]
    fn a_cell_is_8_bytes() {
        // The terminal component's memory budget (docs/display.md): a
        // 146-column line of the scrollback is 1,168 bytes.
        assert_eq!(core::mem::size_of::<Cell>(), 8);
    }

    #[test]
    fn writes_and_moves() {
        let mut t = Terminal::new(10, 3, 0);
        t.feed(b"ab\tc\r\nxy\x08z");
        assert_eq!(line(&t, 0), "ab      c");
        assert_eq!(line(&t, 1), "xz");
        assert_eq!(t.cursor(), (1, 2));
        // LF alone also returns the carriage.
        t.feed(b"\nq");
        assert_eq!(line(&t, 2), "q");
    }

    #[test]
    fn wraps_at_the_margin() {
        let mut t = Terminal::new(4, 3, 0);
        t.feed(b"abcd");
        // Pending wrap: the cursor stays on the last column.
        assert_eq!(t.cursor(), (0, 3));
        assert!(!t.at_line_start());
        t.feed(b"ef");
        assert_eq!((line(&t, 0), line(&t, 1)), ("abcd".into(), "ef".into()));
        // A line exactly as long as the screen wraps no empty line.
        let mut t = Terminal::new(4, 3, 0);
        t.feed(b"abcd\nx");
        assert_eq!((line(&t, 0), line(&t, 1)), ("abcd".into(), "x".into()));
        // TAB stops at the last column.
        let mut t = Terminal::new(10, 1, 0);
        t.feed(b"\t\t\tX");
        assert_eq!(line(&t, 0), "         X");
    }

    #[test]
    fn scrolls_into_a_bounded_scrollback() {
        let mut t = Terminal::new(8, 3, 2);
        for i in 0..6 {
            t.feed(alloc::format!("line {i}\n").as_bytes());
        }
        // Six lines and the empty one the cursor is on: four scrolled off,
        // two kept.
        assert_eq!(t.scrollback_len(), 2);
        assert_eq!(
            [line(&t, 0), line(&t, 1), line(&t, 2)],
            ["line 4", "line 5", ""]
        );
        t.scroll_view(1);
        assert_eq!(t.view(), 1);
        assert_eq!([line(&t, 0), line(&t, 1)], ["line 3", "line 4"]);
        t.scroll_view(100);
        assert_eq!(t.view(), 2);
        assert_eq!([line(&t, 0), line(&t, 1)], ["line 2", "line 3"]);
        t.take_dirty();
        // New output returns to the live screen, all of it dirty.
        t.feed(b"x");
        assert_eq!(t.view(), 0);
        assert_eq!(t.take_dirty().map(|r| (r.cols, r.rows)), Some((8, 3)));
        assert_eq!(line(&t, 2), "x");
        t.scroll_view(-5);
        assert_eq!(t.view(), 0);
    }

    #[test]
    fn no_scrollback() {
        let mut t = Terminal::new(3, 1, 0);
        t.feed(b"a\nb\nc");
        assert_eq!(t.scrollback_len(), 0);
        assert_eq!(line(&t, 0), "c");
    }

    #[test]
    fn sgr_colours() {
        let mut t = Terminal::new(20, 1, 0);
        t.feed(b"\x1b[31ma\x1b[1mb\x1b[0mc\x1b[92;44md\x1b[39;49me\x1b[1mf\x1b[7mg");
        let fg = |c| t.cell(0, c).fg;
        let bg = |c| t.cell(0, c).bg;
        assert_eq!(fg(0), Colour::Indexed(1));
        assert_eq!(fg(1), Colour::Indexed(9), "bold is bright");
        assert_eq!(fg(2), Colour::DefaultFg);
        assert_eq!((fg(3), bg(3)), (Colour::Indexed(10), Colour::Indexed(4)));
        assert_eq!((fg(4), bg(4)), (Colour::DefaultFg, Colour::DefaultBg));
        assert_eq!(fg(5), Colour::BrightFg);
        assert_eq!((fg(6), bg(6)), (Colour::DefaultBg, Colour::BrightFg));
        let mut t = Terminal::new(20, 1, 0);
        t.feed(b"\x1b[38;5;3ma\x1b[38;2;1;2;3mb\x1b[38;5;200mc\x1b[48;5;12md\x1b[mx");
        let fg = |c| t.cell(0, c).fg;
        assert_eq!([fg(0), fg(1), fg(2)], [Colour::Indexed(3); 3]);
        assert_eq!(t.cell(0, 3).bg, Colour::Indexed(12));
        assert_eq!(
            t.cell(0, 4),
            Cell {
                ch: 'x',
                ..Cell::BLANK
            }
        );
    }

    #[test]
    fn cursor_controls_and_erasing() {
        let mut t = Terminal::new(6, 3, 0);
        t.feed(b"abcdef\x1b[2;3HX\x1b[AY\x1b[10CZ\x1b[99;99HW");
        assert_eq!(line(&t, 0), "abcYeZ");
        assert_eq!(line(&t, 1), "  X");
        assert_eq!(line(&t, 2), "     W");
        t.feed(b"\x1b[1;3H\x1b[K");
        assert_eq!(line(&t, 0), "ab");
        t.feed(b"\x1b[2J");
        assert!((0..3).all(|r| line(&t, r).is_empty()));
    }

    #[test]
    fn colours_only_drops_movement() {
        let mut t = Terminal::new(10, 2, 0);
        t.set_controls(Controls::ColoursOnly);
        t.feed(b"ab\rc\x08d\x1b[2J\x1b[1;1He\x1b[32mf");
        assert_eq!(line(&t, 0), "abcdef");
        assert_eq!(t.cell(0, 5).fg, Colour::Indexed(2));
        t.reset_state();
        t.feed(b"g");
        assert_eq!(t.cell(0, 6).fg, Colour::DefaultFg);
    }

    #[test]
    fn plain_text_is_not_parsed() {
        let mut t = Terminal::new(10, 2, 0);
        t.feed(b"\x1b[32m");
        t.print_plain("a\x1b[1mb\n");
        assert_eq!(line(&t, 0), "a?[1mb?");
        assert_eq!(t.cell(0, 0).fg, Colour::Indexed(2));
    }

    #[test]
    fn dirty_rectangle() {
        let mut t = Terminal::new(10, 4, 0);
        let all = t.take_dirty();
        assert_eq!(all, rect(0, 0, 10, 4));
        assert_eq!(t.take_dirty(), None);
        t.feed(b"ab\ncd");
        assert_eq!(t.take_dirty(), rect(0, 0, 2, 2));
        t.feed(b"\x1b[3;5Hxy");
        assert_eq!(t.take_dirty(), rect(4, 2, 2, 1));
        // Moving the cursor changes no cell.
        t.feed(b"\x1b[H\n\n");
        assert_eq!(t.take_dirty(), None);
    }

    #[test]
    fn damage_of_scrolling() {
        let mut t = Terminal::new(10, 4, 10);
        t.take_damage();
        t.feed(b"\x1b[2;3Hx\x1b[4;1H\n");
        // Scrolled once: the x moved from row 1 to row 0, the new bottom
        // line is blank and dirty.
        let d = t.take_damage();
        assert_eq!((d.all, d.scrolled), (false, 1));
        assert_eq!(d.rect, rect(0, 0, 10, 4));
        t.feed(b"ab\n");
        let d = t.take_damage();
        assert_eq!((d.all, d.scrolled), (false, 1));
        assert_eq!(d.rect, rect(0, 2, 10, 2));
        // Dirty cells on the top line scroll away.
        t.feed(b"\x1b[1;1Hq\x1b[4;1H\n");
        let d = t.take_damage();
        assert_eq!(d.rect, rect(0, 3, 10, 1));
        // As many lines as the screen has: everything.
        t.feed(b"\n\n\n\n");
        assert!(t.take_damage().all);
        assert_eq!(t.take_damage(), Damage::default());
        // The view moved: everything.
        t.scroll_view(2);
        assert!(t.take_damage().all);
        // Asked for: everything, the whole grid, nothing else pending.
        t.feed(b"x");
        t.take_damage();
        t.damage_all();
        let d = t.take_damage();
        assert!(d.all);
        assert_eq!(d.rect, rect(0, 0, 10, 4));
        assert_eq!(t.take_damage(), Damage::default());
    }
}
