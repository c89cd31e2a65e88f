//! Bar charts as SVG, written by hand (no plotting dependency): grouped
//! bars with a linear or logarithmic axis, labelled values, a legend.

use std::fmt::Write;

/// One group of bars (e.g. one message size) with a value per series
/// (`None`: not measured).
#[derive(Debug, Clone)]
pub struct Group {
    pub label: String,
    pub values: Vec<Option<f64>>,
}

/// A grouped bar chart.
#[derive(Debug, Clone)]
pub struct Chart {
    pub title: String,
    pub y_label: String,
    pub series: Vec<String>,
    pub groups: Vec<Group>,
    /// Logarithmic y axis (for values spanning orders of magnitude).
    pub log: bool,
}

const COLOURS: [&str; 6] = [
    "#2b7bb9", "#8fc1e6", "#d9534f", "#f0ad4e", "#5cb85c", "#777777",
];
const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 420.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 80.0;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

impl Chart {
    /// The chart as an SVG document.
    pub fn to_svg(&self) -> String {
        let max = self
            .groups
            .iter()
            .flat_map(|g| g.values.iter().flatten())
            .fold(0.0f64, |m, v| m.max(*v));
        let plot_h = HEIGHT - TOP - BOTTOM;
        let plot_w = WIDTH - LEFT - RIGHT;
        let (top_value, scale): (f64, Box<dyn Fn(f64) -> f64>) = if self.log {
            let top = 10f64.powf(max.max(1.0).log10().ceil());
            (
                top,
                Box::new(move |v: f64| {
                    if v <= 1.0 {
                        0.0
                    } else {
                        v.log10() / top.log10()
                    }
                }),
            )
        } else {
            let top = if max > 0.0 { max * 1.1 } else { 1.0 };
            (top, Box::new(move |v: f64| v / top))
        };
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="24" text-anchor="middle" font-size="15">{}</text>"#,
            WIDTH / 2.0,
            escape(&self.title)
        );
        // Axis and grid.
        let ticks: Vec<f64> = if self.log {
            let decades = top_value.log10().round() as i32;
            (0..=decades).map(|d| 10f64.powi(d)).collect()
        } else {
            (0..=4).map(|i| top_value * f64::from(i) / 4.0).collect()
        };
        for t in ticks {
            let y = TOP + plot_h * (1.0 - scale(t));
            let _ = writeln!(
                s,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#dddddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                WIDTH - RIGHT,
                LEFT - 6.0,
                y + 4.0,
                format_value(t)
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="16" y="{:.1}" transform="rotate(-90 16 {:.1})" text-anchor="middle">{}</text>"#,
            TOP + plot_h / 2.0,
            TOP + plot_h / 2.0,
            escape(&self.y_label)
        );
        // Bars.
        let n_series = self.series.len().max(1) as f64;
        let group_w = plot_w / self.groups.len().max(1) as f64;
        let bar_w = group_w * 0.8 / n_series;
        for (gi, g) in self.groups.iter().enumerate() {
            let gx = LEFT + group_w * gi as f64 + group_w * 0.1;
            for (si, v) in g.values.iter().enumerate() {
                let Some(v) = v else { continue };
                let h = plot_h * scale(*v).clamp(0.0, 1.0);
                let x = gx + bar_w * si as f64;
                let y = TOP + plot_h - h;
                let _ = writeln!(
                    s,
                    r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{h:.1}" fill="{}"><title>{}: {}</title></rect><text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="9">{}</text>"#,
                    bar_w * 0.95,
                    COLOURS[si % COLOURS.len()],
                    escape(&self.series[si]),
                    format_value(*v),
                    x + bar_w / 2.0,
                    y - 3.0,
                    format_value(*v)
                );
            }
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                gx + group_w * 0.4,
                TOP + plot_h + 16.0,
                escape(&g.label)
            );
        }
        // Legend.
        for (si, name) in self.series.iter().enumerate() {
            let x = LEFT + 170.0 * (si % 4) as f64;
            let y = HEIGHT - 36.0 + 16.0 * (si / 4) as f64;
            let _ = writeln!(
                s,
                r#"<rect x="{x:.1}" y="{:.1}" width="10" height="10" fill="{}"/><text x="{:.1}" y="{y:.1}">{}</text>"#,
                y - 9.0,
                COLOURS[si % COLOURS.len()],
                x + 14.0,
                escape(name)
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

fn format_value(v: f64) -> String {
    if v >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_has_bars_legend_and_escapes() {
        let chart = Chart {
            title: "IPC <one-way>".into(),
            y_label: "ticks".into(),
            series: vec!["Pecan".into(), "Linux".into()],
            groups: vec![
                Group {
                    label: "0 words".into(),
                    values: vec![Some(200.0), Some(6500.0)],
                },
                Group {
                    label: "4 words".into(),
                    values: vec![Some(210.0), None],
                },
            ],
            log: true,
        };
        let svg = chart.to_svg();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("IPC &lt;one-way&gt;"));
        assert_eq!(
            svg.matches("<rect x=").count(),
            3 + 2,
            "3 bars and 2 legend boxes"
        );
        assert!(svg.contains(">6500<"));
        let linear = Chart {
            log: false,
            ..chart
        }
        .to_svg();
        assert!(linear.ends_with("</svg>\n"));
    }
}
