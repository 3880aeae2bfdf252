//! Charts as inline SVG (plotters' SVG backend: `<text>` elements in `sans-serif`, no font
//! files), from plain data, so that any view (the HTML report, a later `compare`) can draw
//! them. Each function returns the SVG, or why it could not draw it; the legend is left to
//! the page (HTML lays out many entries better than a box inside the plot).

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// A caller's text as a chart writes it: control characters as the terminal shows them
/// (`\x1b`); the SVG backend escapes XML's own (`<`, `&`) but passes controls through, and
/// labels name machines and GPUs (`gpuaudit compare`'s hostnames, a measurement's name).
fn shown(s: &str) -> String {
    super::escape::escape_line(s).into_owned()
}

/// The largest magnitude a chart draws: far past any figure gpuaudit measures (GB/s, ms,
/// MHz, W, ratios). A figure past it (1.7e308 in a report someone made) or not finite is
/// drawn without its bar or point, the bar's note saying so; an axis is never built from it
/// (plotters' axis over a range near `f64::MAX` overflows to infinity and never ends).
pub const MAX_DRAWN: f64 = 1e12;

/// Whether a chart draws `v` (finite, within [`MAX_DRAWN`]).
pub fn drawable(v: f64) -> bool {
    v.is_finite() && v.abs() <= MAX_DRAWN
}

/// The note of a bar whose figure is not drawn.
fn not_drawn_note(note: &str) -> String {
    format!("{note} (not drawn: out of range)")
}

/// The lines with only their drawable points.
fn drawable_lines(lines: &[Line]) -> Vec<Line> {
    lines
        .iter()
        .map(|l| Line {
            points: l
                .points
                .iter()
                .copied()
                .filter(|p| drawable(p.0) && drawable(p.1))
                .collect(),
            ..l.clone()
        })
        .collect()
}

/// One line of a line chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub name: String,
    /// CSS colour (`#rrggbb`), also the legend's.
    pub color: String,
    pub points: Vec<(f64, f64)>,
    /// Drawn thinner and lighter (a secondary curve, e.g. pageable copies).
    pub faint: bool,
}

/// One bar of [`ratio_bars`].
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    pub label: String,
    /// Measured / expected.
    pub ratio: f64,
    /// Written at the bar's end: "88% (GPU 1)".
    pub note: String,
    /// What healthy GPUs of the model reach, as a share of the same expectation: marked on
    /// the bar's row where known.
    pub attainable: Option<f64>,
    /// The verdict of the check that judges the figure: the bar's colour (None: the neutral
    /// blue).
    pub status: Option<crate::finding::Status>,
}

/// A verdict's colour (Okabe–Ito, as the GPUs' lines: told apart without colour vision too,
/// and the note beside the bar says the figure).
pub fn status_color(s: Option<crate::finding::Status>) -> &'static str {
    use crate::finding::Status;
    match s {
        Some(Status::Pass) => "#009e73",
        Some(Status::Warn) => "#e69f00",
        Some(Status::Fail) => "#d55e00",
        Some(Status::Info) | Some(Status::Skip) | None => "#0072b2",
    }
}

/// A span of time in which a clock-event reason was active on one row (GPU) of the
/// timeline's event strip.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// The strip's row: a GPU index.
    pub row: u32,
    pub from_s: f64,
    pub to_s: f64,
    /// CSS colour of its kind.
    pub color: String,
}

/// One panel of [`timeline`]: a quantity over time, one line per GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    /// "SM clock (MHz)".
    pub y_label: String,
    pub lines: Vec<Line>,
    /// Levels drawn across the panel as dashed lines with their label: the power limit, the
    /// boost clock, what a healthy GPU reaches.
    pub references: Vec<Reference>,
}

/// A level marked across a panel of [`timeline`]: "power limit 700 W".
#[derive(Clone, Debug, PartialEq)]
pub struct Reference {
    pub label: String,
    pub value: f64,
}

/// The room over the highest value or reference line of a burn panel, as a share of its
/// range: a reference line's label (written above it) fits under the panel's top.
pub const PANEL_HEADROOM: f64 = 0.15;

/// A burn panel's y axis: from 0 (a clock, a power, a temperature and TFLOPS count from
/// there), or a little below the lowest value where one is negative, to [`PANEL_HEADROOM`]
/// over the highest of its values and its references. Fitted to the values alone the clock's
/// axis began at 1450 MHz, and a GPU's ±50 MHz filled the panel as if it were a fault.
pub fn panel_range(values: &[f64], references: &[f64]) -> (f64, f64) {
    let all = || {
        values
            .iter()
            .chain(references)
            .copied()
            .filter(|v| drawable(*v))
    };
    let lo = all().fold(0.0f64, f64::min);
    let hi = all().fold(0.0f64, f64::max);
    let lo = if lo < 0.0 { lo - (hi - lo) * 0.05 } else { 0.0 };
    // All zero (an idle GPU's power in a report someone made): a unit's range.
    let hi = if hi > lo { hi } else { lo + 1.0 };
    (lo, hi + (hi - lo) * PANEL_HEADROOM)
}

/// The colours of GPU 0, 1, ... (then round again): distinct on white and for the common
/// forms of colour blindness (Okabe–Ito, with black left out for the lines).
pub const PALETTE: [&str; 8] = [
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#7f6000", "#6a3d9a",
];

pub fn gpu_color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

pub const WIDTH: u32 = 900;
const FONT: &str = "sans-serif";

/// The charts' text, in pixels as drawn (a printed page then scales the 900-px chart to its
/// width: about 0.8 on A4 or Letter). 14 px: the 11 and 12 asked for before were drawn at
/// 8.9 and 9.7 px (see [`PLOTTERS_FONT_SCALE`]), and printed at 7 px.
pub const TEXT_PX: f64 = 14.0;
/// The smaller text of the burn's panels (their ticks and reference lines' labels).
pub const SMALL_PX: f64 = 13.0;
/// Plotters' SVG backend writes a font of size `s` as `font-size="s / 1.24"` (its sizes are
/// points); [`font`] asks for `px` times this so that the SVG says `px`.
const PLOTTERS_FONT_SCALE: f64 = 1.24;
/// The width of a character of sans-serif, as a share of its size: DejaVu Sans (the usual
/// sans-serif on Linux, where Chromium prints) draws digits 0.64 em wide and text about
/// 0.6; a little wide is room to spare, a little narrow a note across a line.
pub const EM_PER_CHAR: f64 = 0.64;
/// The wide ones: "%" (0.95 em in DejaVu Sans: "90%" estimated at 0.64 em a character
/// touched the 100% line), M, W, m, w and the ★ of compare's best.
pub const EM_WIDE: f64 = 1.0;

/// The chart font at `px` pixels (in the SVG's own units).
fn font(px: f64) -> TextStyle<'static> {
    TextStyle::from((FONT, px * PLOTTERS_FONT_SCALE).into_font())
}

/// About how wide `s` is drawn at `px`: the SVG backend lays out text without font files, so
/// the notes are placed by this estimate.
pub fn text_width(s: &str, px: f64) -> f64 {
    let em: f64 = s
        .chars()
        .map(|c| match c {
            '%' | 'M' | 'W' | 'm' | 'w' | '★' => EM_WIDE,
            _ => EM_PER_CHAR,
        })
        .sum();
    em * px
}

/// `n` rows (segments 0 … n−1). Plotters' integer ranges include their end, so `0..n−1`.
fn rows_of(
    n: usize,
) -> plotters::coord::ranged1d::SegmentedCoord<plotters::coord::types::RangedCoordusize> {
    // 0..n-1 holds n segments; 0..0 holds one of no height, where a lone bar was drawn
    // with a negative height and its label was lost (a compare figure one machine has, a
    // one-GPU burn's throttle row): one row is drawn in the lower of two.
    (0..n.saturating_sub(1).max(1)).into_segmented()
}

fn rgb(css: &str) -> RGBColor {
    let hex = css.trim_start_matches('#');
    let byte = |i: usize| {
        hex.get(i..i + 2)
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .unwrap_or(0x80)
    };
    RGBColor(byte(0), byte(2), byte(4))
}

/// Plotters' errors as text (a chart that cannot be drawn is a sentence, not a panic).
fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("the chart could not be drawn: {e:?}")
}

fn svg(
    height: u32,
    draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<(), String>,
) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        draw(&root)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

/// The rows of a bar chart: `n` rows, top to bottom in the order given.
type BarRows = Cartesian2d<
    RangedCoordf64,
    plotters::coord::ranged1d::SegmentedCoord<plotters::coord::types::RangedCoordusize>,
>;

/// One row of [`horizontal_bars`].
struct BarRow<'a> {
    label: &'a str,
    /// Where the bar ends on the x axis (clamped to the axis; not finite: no bar).
    length: f64,
    /// Written at the bar's end.
    note: &'a str,
    color: RGBColor,
}

/// How a bar chart looks: its axis and the room its labels take.
struct BarLayout<'a> {
    /// The axis's end before the notes are fitted ([`plan_notes`] may push it further).
    top: f64,
    x_desc: &'a str,
    x_format: &'a dyn Fn(&f64) -> String,
    row_px: u32,
}

/// The room a bar chart keeps around its plot, in pixels.
const BAR_MARGIN: u32 = 12;
/// Below a bar chart's plot: the tick labels, a gap, then the axis title. At 28 px the title
/// sat on the middle tick label ("measured / expected" over "60%", issue 23); a tick label is
/// drawn [`TICK_GAP`] below the axis, so this leaves [`TITLE_GAP`] between the two lines.
const BAR_X_AREA: u32 = TICK_GAP + TEXT_PX as u32 + TITLE_GAP + TEXT_PX as u32 + 4;
/// Right of a plot whose last x tick label is centred on its edge ("1 GiB", "60 s"): half
/// the label's width; at 12 px "1 GiB" was cut to "1 Gi".
const EDGE_LABEL_ROOM: u32 = 28;
/// How far below the axis plotters draws its tick labels (5 px of tick, 5 of space).
const TICK_GAP: u32 = 10;
/// The least space between a row of tick labels and the axis title under them.
const TITLE_GAP: u32 = 6;
/// A note's distance from the end of its bar, or from a line it was moved past: at one space
/// ("88%" right after the bar) it touched the bar's end.
pub const NOTE_GAP: f64 = 6.0;
/// The least space a note keeps on each side of a line it does not cross (the 100% line, the
/// attainable tick): "99%" was written across the 100% line.
pub const NOTE_CLEAR: f64 = 3.0;
/// How much further the axis reaches each time the notes do not fit (5%), and how often.
const TOP_STEP: f64 = 1.05;
const TOP_STEPS: usize = 80;

/// Where the bars' notes go: for each row, how many pixels right of its bar's end its note
/// starts; and the axis's end, grown from `top` until every note ends inside the plot.
///
/// `ends`: each bar's end on the axis; `widths`: each note's width in pixels; `marks`: per
/// row the axis values of the lines drawn across it; `plot_px`: the plot's width. A note
/// starts [`NOTE_GAP`] after its bar; where it would come within [`NOTE_CLEAR`] of a line,
/// it starts [`NOTE_GAP`] after the line instead (the next line likewise).
pub fn plan_notes(
    ends: &[f64],
    widths: &[f64],
    marks: &[Vec<f64>],
    top: f64,
    plot_px: f64,
) -> (f64, Vec<f64>) {
    let place = |top: f64| -> (bool, Vec<f64>) {
        let px = |x: f64| x.clamp(0.0, top) / top * plot_px;
        let mut fits = true;
        let offsets = ends
            .iter()
            .enumerate()
            .map(|(i, end)| {
                let end_px = px(*end);
                let w = widths.get(i).copied().unwrap_or(0.0);
                let mut lines: Vec<f64> = marks
                    .get(i)
                    .map(|m| m.iter().map(|x| px(*x)).collect())
                    .unwrap_or_default();
                lines.sort_by(f64::total_cmp);
                let mut start = end_px + NOTE_GAP;
                for l in lines {
                    if start - NOTE_CLEAR < l && start + w + NOTE_CLEAR > l {
                        start = l + NOTE_GAP;
                    }
                }
                fits &= start + w <= plot_px;
                start - end_px
            })
            .collect();
        (fits, offsets)
    };
    let mut t = top;
    for _ in 0..TOP_STEPS {
        let (fits, offsets) = place(t);
        if fits {
            return (t, offsets);
        }
        t *= TOP_STEP;
    }
    // A note too wide for any axis (a hostname of hundreds of characters): the last try;
    // the SVG clips what runs past its edge.
    (t, place(t).1)
}

/// Horizontal bars from 0, one row each, the label at the left and the note at the bar's end
/// (both through [`shown`]), clear of the lines in `marks` (per row, axis values: see
/// [`plan_notes`]); `more` draws on the chart after them. For [`ratio_bars`] and
/// [`value_bars`]. Returns the SVG and the axis's end.
fn horizontal_bars(
    rows: &[BarRow],
    layout: &BarLayout,
    marks: &[Vec<f64>],
    more: impl FnOnce(&mut ChartContext<SVGBackend, BarRows>, usize, f64) -> Result<(), String>,
) -> Result<String, String> {
    let n = rows.len();
    let labels: Vec<String> = rows.iter().map(|r| shown(r.label)).collect();
    let notes: Vec<String> = rows.iter().map(|r| shown(r.note)).collect();
    let label_cols = label_area(&labels);
    let plot_px = f64::from(WIDTH - BAR_MARGIN - EDGE_LABEL_ROOM - label_cols);
    let lengths: Vec<f64> = rows
        .iter()
        .map(|r| match drawable(r.length) {
            true => r.length.max(0.0),
            false => 0.0,
        })
        .collect();
    let widths: Vec<f64> = notes.iter().map(|s| text_width(s, TEXT_PX)).collect();
    let (top, offsets) = plan_notes(&lengths, &widths, marks, layout.top, plot_px);
    let height = 2 * BAR_MARGIN + BAR_X_AREA + layout.row_px * n as u32;
    svg(height, |root| {
        let mut chart = ChartBuilder::on(root)
            .margin(BAR_MARGIN)
            .margin_right(EDGE_LABEL_ROOM)
            .x_label_area_size(BAR_X_AREA)
            .y_label_area_size(label_cols)
            .build_cartesian_2d(0f64..top, rows_of(n))
            .map_err(err)?;
        let label_of = |v: &SegmentValue<usize>| match v {
            SegmentValue::CenterOf(i) if *i < n => {
                labels.get(n - 1 - *i).cloned().unwrap_or_default()
            }
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n)
            .y_label_formatter(&label_of)
            .x_label_formatter(layout.x_format)
            .light_line_style(RGBColor(0xf2, 0xf2, 0xf2))
            .x_desc(layout.x_desc)
            .label_style(font(TEXT_PX))
            .axis_desc_style(font(TEXT_PX))
            .draw()
            .map_err(err)?;
        chart
            .draw_series(lengths.iter().zip(rows).enumerate().map(|(i, (end, r))| {
                let row = n - 1 - i;
                let mut bar = Rectangle::new(
                    [
                        (0.0, SegmentValue::Exact(row)),
                        (*end, SegmentValue::Exact(row + 1)),
                    ],
                    r.color.mix(0.85).filled(),
                );
                bar.set_margin(4, 4, 0, 0);
                bar
            }))
            .map_err(err)?;
        let style = font(TEXT_PX).pos(Pos::new(HPos::Left, VPos::Center));
        chart
            .draw_series(notes.iter().enumerate().map(|(i, note)| {
                let at = (
                    lengths.get(i).copied().unwrap_or(0.0),
                    SegmentValue::CenterOf(n - 1 - i),
                );
                let dx = offsets.get(i).copied().unwrap_or(NOTE_GAP).round() as i32;
                EmptyElement::at(at) + Text::new(note.clone(), (dx, 0), style.clone())
            }))
            .map_err(err)?;
        more(&mut chart, n, top)
    })
}

/// The width of the label column of a bar chart: its longest label and a tick, within
/// 120..=360 px (a longer label is cut by the SVG's edge rather than squeeze the bars).
fn label_area(labels: &[String]) -> u32 {
    let longest = labels
        .iter()
        .map(|l| text_width(l, TEXT_PX))
        .fold(0.0f64, f64::max);
    (longest.ceil() as u32 + 16).clamp(120, 360)
}

/// Horizontal bars of measured / expected, one per figure, a dashed line at 100% (the
/// datasheet). The axis reaches past the longest bar and past 100%, and far enough that each
/// bar's note fits beside it.
pub fn ratio_bars(bars: &[Bar]) -> Result<String, String> {
    if bars.is_empty() {
        return Err("no figure has a datasheet value to be held against".into());
    }
    let top = bars
        .iter()
        .map(|b| b.ratio)
        .filter(|r| drawable(*r))
        .fold(1.0f64, f64::max)
        * 1.18;
    let notes: Vec<String> = bars
        .iter()
        .map(|b| match drawable(b.ratio) {
            true => b.note.clone(),
            false => not_drawn_note(&b.note),
        })
        .collect();
    let rows: Vec<BarRow> = bars
        .iter()
        .zip(&notes)
        .map(|(b, note)| BarRow {
            label: &b.label,
            length: b.ratio,
            note,
            color: rgb(status_color(b.status)),
        })
        .collect();
    // What healthy GPUs reach, where it is a share that can be drawn.
    let attainable = |b: &Bar| b.attainable.filter(|a| drawable(*a) && *a > 0.0);
    // The lines across each row: the 100% line, and the row's own tick.
    let marks: Vec<Vec<f64>> = bars
        .iter()
        .map(|b| std::iter::once(1.0).chain(attainable(b)).collect())
        .collect();
    let percent = |x: &f64| format!("{:.0}%", x * 100.0);
    let layout = BarLayout {
        top,
        x_desc: "measured / expected",
        x_format: &percent,
        row_px: 28,
    };
    horizontal_bars(&rows, &layout, &marks, |chart, n, top| {
        chart
            .draw_series(DashedLineSeries::new(
                [(1.0, SegmentValue::Exact(0)), (1.0, SegmentValue::Exact(n))],
                6,
                4,
                BLACK.mix(0.6).stroke_width(1),
            ))
            .map_err(err)?;
        // What healthy GPUs reach: a solid tick across the bar's own row.
        for (i, b) in bars.iter().enumerate() {
            let Some(a) = attainable(b).filter(|a| *a <= top) else {
                continue;
            };
            let row = n - 1 - i;
            chart
                .draw_series(LineSeries::new(
                    [
                        (a, SegmentValue::Exact(row)),
                        (a, SegmentValue::Exact(row + 1)),
                    ],
                    BLACK.stroke_width(3),
                ))
                .map_err(err)?;
        }
        Ok(())
    })
}

/// One bar of [`value_bars`]: a machine's value of one figure.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueBar {
    pub label: String,
    pub value: f64,
    /// Written at the bar's end: "55.2 GB/s ★".
    pub note: String,
    /// CSS colour (`#rrggbb`).
    pub color: String,
}

/// Horizontal bars of one figure's values, one per machine (`gpuaudit compare`), from 0 to a
/// little past the largest (further where a note needs the room); `x_desc` names the axis
/// ("GB/s").
pub fn value_bars(bars: &[ValueBar], x_desc: &str) -> Result<String, String> {
    let finite: Vec<f64> = bars
        .iter()
        .map(|b| b.value)
        .filter(|v| drawable(*v) && *v >= 0.0)
        .collect();
    if finite.is_empty() {
        return Err("no machine has a value of it that can be drawn".into());
    }
    let top = finite
        .iter()
        .copied()
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE)
        * 1.25;
    let notes: Vec<String> = bars
        .iter()
        .map(|b| match drawable(b.value) {
            true => b.note.clone(),
            false => not_drawn_note(&b.note),
        })
        .collect();
    let rows: Vec<BarRow> = bars
        .iter()
        .zip(&notes)
        .map(|(b, note)| BarRow {
            label: &b.label,
            length: b.value,
            note,
            color: rgb(&b.color),
        })
        .collect();
    let figure = |x: &f64| crate::units::figure(*x);
    let layout = BarLayout {
        top,
        x_desc,
        x_format: &figure,
        row_px: 30,
    };
    horizontal_bars(&rows, &layout, &[], |_, _, _| Ok(()))
}

/// Bandwidth against transfer size: x is log2 of the size (labelled "4 KiB" … "1 GiB"),
/// one line per curve.
pub fn by_size(lines: &[Line], y_label: &str) -> Result<String, String> {
    let lines = &drawable_lines(lines)[..];
    let pts: Vec<(f64, f64)> = lines
        .iter()
        .flat_map(|l| l.points.iter().copied())
        .collect();
    if pts.iter().filter(|p| p.0 > 0.0).count() < 2 {
        return Err("fewer than two sizes were measured".into());
    }
    let lx: Vec<f64> = pts
        .iter()
        .filter(|p| p.0 > 0.0)
        .map(|p| p.0.log2())
        .collect();
    let x0 = lx.iter().copied().fold(f64::INFINITY, f64::min).floor();
    let x1 = lx
        .iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max)
        .ceil()
        .max(x0 + 1.0);
    let y1 = pts.iter().map(|p| p.1).fold(0.0f64, f64::max) * 1.12;
    let y1 = if y1 > 0.0 { y1 } else { 1.0 };
    svg(380, |root| {
        let mut chart = ChartBuilder::on(root)
            .margin(12)
            // The last tick label ("1 GiB") is centred on the plot's edge: half of it past.
            .margin_right(EDGE_LABEL_ROOM)
            .x_label_area_size(TICK_GAP + SMALL_PX as u32 + TITLE_GAP + TEXT_PX as u32 + 4)
            .y_label_area_size(70)
            .build_cartesian_2d(x0..x1, 0f64..y1)
            .map_err(err)?;
        let steps = (x1 - x0) as usize;
        chart
            .configure_mesh()
            .x_labels(steps.min(12) + 1)
            .x_label_formatter(&|x| size_label(*x))
            .light_line_style(RGBColor(0xf2, 0xf2, 0xf2))
            .y_label_formatter(&|y| axis_number(*y))
            .x_desc("copy size")
            .y_desc(y_label)
            .label_style(font(SMALL_PX))
            .axis_desc_style(font(TEXT_PX))
            .draw()
            .map_err(err)?;
        for l in lines {
            draw_line(&mut chart, l, |(x, y)| (x.max(1.0).log2(), y))?;
        }
        Ok(())
    })
}

fn draw_line<F: Fn((f64, f64)) -> (f64, f64)>(
    chart: &mut ChartContext<SVGBackend, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    l: &Line,
    map: F,
) -> Result<(), String> {
    let c = rgb(&l.color);
    let style = if l.faint {
        c.mix(0.55).stroke_width(1)
    } else {
        c.stroke_width(2)
    };
    let pts: Vec<(f64, f64)> = l.points.iter().copied().map(map).collect();
    chart
        .draw_series(LineSeries::new(pts.clone(), style))
        .map_err(err)?;
    if pts.len() <= 40 {
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 2, c.filled())))
            .map_err(err)?;
    }
    Ok(())
}

/// An axis number without needless decimals: "60", "2.5".
fn axis_number(y: f64) -> String {
    if (y - y.round()).abs() < 1e-9 {
        format!("{y:.0}")
    } else {
        format!("{y}")
    }
}

/// "4 KiB", "1 MiB" for integer log2 sizes; nothing between them.
fn size_label(log2: f64) -> String {
    if (log2 - log2.round()).abs() > 1e-6 || !(0.0..63.0).contains(&log2) {
        return String::new();
    }
    crate::units::bytes(1u64 << (log2.round() as u32))
}

/// A GPU×GPU matrix: one cell per ordered pair (row: from, column: to), coloured by
/// `shade` (0 light … 1 dark), the value written in it; the diagonal and missing pairs grey.
pub fn heat_map(gpus: &[u32], cells: &[(u32, u32, f64, f64)]) -> Result<String, String> {
    if gpus.len() < 2 || cells.is_empty() {
        return Err("it needs two GPUs or more".into());
    }
    let n = gpus.len();
    let side = (44 * n as u32).clamp(200, 620);
    let height = side + 70;
    svg(height, |root| {
        let (area, _) = root.split_horizontally(side + 110);
        let mut chart = ChartBuilder::on(&area)
            .margin(12)
            .x_label_area_size(TICK_GAP + SMALL_PX as u32 + TITLE_GAP + TEXT_PX as u32 + 4)
            .y_label_area_size(70)
            .build_cartesian_2d(rows_of(n), rows_of(n))
            .map_err(err)?;
        let gpu_at = |v: &SegmentValue<usize>, flip: bool| match v {
            SegmentValue::CenterOf(i) if *i < n => {
                let k = if flip { n - 1 - *i } else { *i };
                gpus.get(k).map(|g| format!("GPU {g}")).unwrap_or_default()
            }
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(n)
            .y_labels(n)
            .x_label_formatter(&|v| gpu_at(v, false))
            .y_label_formatter(&|v| gpu_at(v, true))
            .x_desc("to")
            .y_desc("from")
            .label_style(font(SMALL_PX))
            .axis_desc_style(font(TEXT_PX))
            .draw()
            .map_err(err)?;
        let low = RGBColor(0xe8, 0xf1, 0xfa);
        let high = RGBColor(0x08, 0x45, 0x94);
        let mut rects = Vec::new();
        let mut texts = Vec::new();
        let small =
            font(if n > 6 { 11.0 } else { SMALL_PX }).pos(Pos::new(HPos::Center, VPos::Center));
        for (ri, src) in gpus.iter().enumerate() {
            for (ci, dst) in gpus.iter().enumerate() {
                let row = n - 1 - ri;
                let cell = cells.iter().find(|c| c.0 == *src && c.1 == *dst);
                let color = match cell {
                    Some(c) => blend(low, high, c.3.clamp(0.0, 1.0)),
                    None => RGBColor(0xee, 0xee, 0xee),
                };
                let mut r = Rectangle::new(
                    [
                        (SegmentValue::Exact(ci), SegmentValue::Exact(row)),
                        (SegmentValue::Exact(ci + 1), SegmentValue::Exact(row + 1)),
                    ],
                    color.filled(),
                );
                r.set_margin(1, 1, 1, 1);
                rects.push(r);
                if let Some(c) = cell {
                    let fg: &RGBColor = if c.3 > 0.55 { &WHITE } else { &BLACK };
                    texts.push(Text::new(
                        super::fmt_value(c.2),
                        (SegmentValue::CenterOf(ci), SegmentValue::CenterOf(row)),
                        small.clone().color(fg),
                    ));
                }
            }
        }
        chart.draw_series(rects).map_err(err)?;
        chart.draw_series(texts).map_err(err)?;
        Ok(())
    })
}

fn blend(a: RGBColor, b: RGBColor, t: f64) -> RGBColor {
    let m = |x: u8, y: u8| (x as f64 + (y as f64 - x as f64) * t).round() as u8;
    RGBColor(m(a.0, b.0), m(a.1, b.1), m(a.2, b.2))
}

/// The dashed lines of a panel's references, each labelled at the right above its line; a
/// label that would overlap one already written (two GPUs' power limits 5 W apart) is left
/// out, its line is not.
fn reference_lines(
    chart: &mut ChartContext<SVGBackend, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    references: &[Reference],
    end: f64,
) -> Result<(), String> {
    let ink = RGBColor(0x44, 0x44, 0x44);
    let style = font(SMALL_PX)
        .pos(Pos::new(HPos::Right, VPos::Bottom))
        .color(&ink);
    let mut written: Vec<i32> = Vec::new();
    for r in references {
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, r.value), (end, r.value)],
                6,
                4,
                ink.stroke_width(1),
            ))
            .map_err(err)?;
        let y = chart.backend_coord(&(end, r.value)).1;
        if written.iter().any(|w| (w - y).abs() < SMALL_PX as i32 + 2) {
            continue;
        }
        written.push(y);
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((end, r.value))
                    + Text::new(shown(&r.label), (-4, -3), style.clone()),
            ))
            .map_err(err)?;
    }
    Ok(())
}

/// Panels over a shared time axis (seconds), one line per GPU in each, and below them a
/// strip with one row per GPU where clock-event reasons were active.
pub fn timeline(
    seconds: f64,
    panels: &[Panel],
    rows: &[u32],
    events: &[Event],
) -> Result<String, String> {
    let panels: Vec<Panel> = panels
        .iter()
        .map(|p| Panel {
            y_label: p.y_label.clone(),
            lines: drawable_lines(&p.lines),
            references: p
                .references
                .iter()
                .filter(|r| drawable(r.value))
                .cloned()
                .collect(),
        })
        .collect();
    if panels
        .iter()
        .all(|p| p.lines.iter().all(|l| l.points.is_empty()))
    {
        return Err("no sample was taken during the burn".into());
    }
    let end = if seconds > 0.0 && drawable(seconds) {
        seconds
    } else {
        let last = panels
            .iter()
            .flat_map(|p| p.lines.iter().flat_map(|l| l.points.iter().map(|x| x.0)))
            .fold(0.0f64, f64::max);
        if last > 0.0 {
            last
        } else {
            1.0
        }
    };
    let events: Vec<&Event> = events
        .iter()
        .filter(|e| drawable(e.from_s) && drawable(e.to_s))
        .collect();
    const PANEL: u32 = 170;
    // The panels' tick labels under each: [`TICK_GAP`] and a line of text.
    const PANEL_X_AREA: u32 = TICK_GAP + SMALL_PX as u32 + 4;
    // The strip's: its tick labels, then the axis title under them.
    const STRIP_X_AREA: u32 = TICK_GAP + SMALL_PX as u32 + TITLE_GAP + TEXT_PX as u32 + 4;
    let strip = STRIP_X_AREA + 24 + 18 * rows.len().max(1) as u32;
    let height = PANEL * panels.len() as u32 + strip;
    svg(height, |root| {
        let mut rest = root.clone();
        for p in &panels {
            let (top, below) = rest.split_vertically(PANEL);
            rest = below;
            let ys: Vec<f64> = p
                .lines
                .iter()
                .flat_map(|l| l.points.iter().map(|x| x.1))
                .collect();
            let refs: Vec<f64> = p.references.iter().map(|r| r.value).collect();
            let (lo, hi) = panel_range(&ys, &refs);
            let mut chart = ChartBuilder::on(&top)
                .margin_left(12)
                .margin_right(EDGE_LABEL_ROOM)
                .margin_top(8)
                .x_label_area_size(PANEL_X_AREA)
                .y_label_area_size(76)
                .build_cartesian_2d(0f64..end, lo..hi)
                .map_err(err)?;
            chart
                .configure_mesh()
                .y_labels(5)
                .x_labels(8)
                .x_label_formatter(&|x| format!("{x:.0} s"))
                .light_line_style(RGBColor(0xf4, 0xf4, 0xf4))
                .y_label_formatter(&|y| axis_number(*y))
                .y_desc(p.y_label.as_str())
                .label_style(font(SMALL_PX))
                .axis_desc_style(font(SMALL_PX))
                .draw()
                .map_err(err)?;
            reference_lines(&mut chart, &p.references, end)?;
            for l in &p.lines {
                draw_line(&mut chart, l, |p| p)?;
            }
        }
        let n = rows.len().max(1);
        let mut chart = ChartBuilder::on(&rest)
            .margin_left(12)
            .margin_right(EDGE_LABEL_ROOM)
            .margin_top(6)
            .x_label_area_size(STRIP_X_AREA)
            .y_label_area_size(76)
            .build_cartesian_2d(0f64..end, rows_of(n))
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_labels(8)
            .y_labels(n)
            .x_label_formatter(&|x| format!("{x:.0} s"))
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) if *i < n => rows
                    .get(n - 1 - *i)
                    .map(|g| format!("GPU {g}"))
                    .unwrap_or_default(),
                _ => String::new(),
            })
            .x_desc("time since the burn began")
            .label_style(font(SMALL_PX))
            .axis_desc_style(font(TEXT_PX))
            .draw()
            .map_err(err)?;
        chart
            .draw_series(events.iter().filter_map(|e| {
                let i = rows.iter().position(|r| *r == e.row)?;
                let row = n - 1 - i;
                let mut r = Rectangle::new(
                    [
                        (e.from_s.clamp(0.0, end), SegmentValue::Exact(row)),
                        (e.to_s.clamp(0.0, end), SegmentValue::Exact(row + 1)),
                    ],
                    rgb(&e.color).filled(),
                );
                r.set_margin(2, 2, 0, 0);
                Some(r)
            }))
            .map_err(err)?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(svg: &str, tag: &str) -> usize {
        svg.matches(&format!("<{tag}")).count()
    }

    #[test]
    fn bars_draw_one_rectangle_per_figure_and_the_datasheet_line() {
        let bars = vec![
            Bar {
                label: "memory copy".into(),
                ratio: 0.89,
                note: "89%".into(),
                attainable: None,
                status: None,
            },
            Bar {
                label: "GEMM bf16 <b>".into(),
                ratio: 0.8,
                note: "80% (GPU 1)".into(),
                attainable: None,
                status: None,
            },
        ];
        let s = ratio_bars(&bars).unwrap();
        assert!(s.starts_with("<svg"), "{s}");
        // The background, two bars.
        assert!(count(&s, "rect") >= 3, "{s}");
        assert!(s.contains("80% (GPU 1)"));
        // Each label once, at its bar (no row left over at the top).
        assert_eq!(s.matches("memory copy").count(), 1, "{s}");
        // Text is escaped by the backend; no font is loaded to lay it out.
        assert!(
            s.contains("GEMM bf16 &lt;b&gt;") && !s.contains("<b>"),
            "{s}"
        );
        assert!(s.contains("font-family=\"sans-serif\""));
        assert!(ratio_bars(&[]).is_err());
    }

    /// A bar takes its check's verdict's colour, and what healthy GPUs reach is a tick on it
    /// (issue 22): none without an attainable value, one per bar that has it.
    #[test]
    fn bars_are_coloured_by_their_verdict_and_marked_where_healthy_gpus_reach() {
        use crate::finding::Status;
        let bar = |status: Option<Status>, attainable: Option<f64>| Bar {
            label: "x".into(),
            ratio: 0.8,
            note: "80%".into(),
            attainable,
            status,
        };
        for (s, css) in [
            (Some(Status::Pass), "#009E73"),
            (Some(Status::Warn), "#E69F00"),
            (Some(Status::Fail), "#D55E00"),
            (None, "#0072B2"),
        ] {
            let svg = ratio_bars(&[bar(s, None)]).unwrap();
            assert!(svg.to_uppercase().contains(css), "{s:?}: {svg}");
        }
        let ticks = |svg: &str| svg.matches("stroke-width=\"3\"").count();
        let none = ratio_bars(&[bar(None, None), bar(None, None)]).unwrap();
        let two = ratio_bars(&[bar(None, Some(0.88)), bar(None, Some(0.81))]).unwrap();
        assert_eq!(ticks(&none), 0, "{none}");
        assert_eq!(ticks(&two), 2, "{two}");
        // Past the axis (or not a number): not drawn.
        let off = ratio_bars(&[bar(None, Some(f64::NAN)), bar(None, Some(9.0))]).unwrap();
        assert_eq!(ticks(&off), 0, "{off}");
    }

    /// The widths of the filled rectangles of an SVG (the bars; the background is white).
    fn bar_widths(svg: &str) -> Vec<f64> {
        svg.split("<rect")
            .skip(1)
            .filter(|r| !r.contains("fill=\"#FFFFFF\""))
            .filter_map(|r| {
                let w = r.split("width=\"").nth(1)?.split('"').next()?;
                w.parse().ok()
            })
            .collect()
    }

    /// An attribute of an SVG element's text (`attr(r#"<rect x="3" ..."#, "x")`).
    fn attr(element: &str, name: &str) -> Option<f64> {
        element
            .split(&format!(" {name}=\""))
            .nth(1)?
            .split('"')
            .next()?
            .parse()
            .ok()
    }

    /// The bars of an SVG: (top y, height, width), in the order drawn.
    fn bars_of(svg: &str) -> Vec<(f64, f64, f64)> {
        svg.split("<rect")
            .skip(1)
            .filter(|r| !r.contains("fill=\"#FFFFFF\""))
            .filter_map(|r| Some((attr(r, "y")?, attr(r, "height")?, attr(r, "width")?)))
            .collect()
    }

    /// The y of a text element whose content is `text`.
    fn text_y(svg: &str, text: &str) -> Option<f64> {
        svg.split("<text")
            .find(|t| {
                t.split('>')
                    .nth(1)
                    .and_then(|c| c.split('<').next())
                    .is_some_and(|c| c.trim() == text)
            })
            .and_then(|t| attr(t, "y"))
    }

    /// The x axis: its length in pixels (the polyline along the bottom of the plot).
    fn axis_length(svg: &str) -> f64 {
        svg.split("<polyline")
            .skip(1)
            .filter_map(|p| {
                let pts = p.split("points=\"").nth(1)?.split('"').next()?;
                let xy: Vec<(f64, f64)> = pts
                    .split_whitespace()
                    .filter_map(|q| {
                        let (x, y) = q.split_once(',')?;
                        Some((x.parse().ok()?, y.parse().ok()?))
                    })
                    .collect();
                match xy.as_slice() {
                    [(x0, y0), (x1, y1)] if y0 == y1 => Some(x1 - x0),
                    _ => None,
                }
            })
            .fold(0.0, f64::max)
    }

    #[test]
    fn each_label_stands_at_its_own_bar_in_the_order_given() {
        let bars: Vec<ValueBar> = [("a", 100.0), ("b", 50.0), ("c", 75.0)]
            .iter()
            .enumerate()
            .map(|(i, (l, v))| ValueBar {
                label: l.to_string(),
                value: *v,
                note: format!("{v} GB/s"),
                color: gpu_color(i).into(),
            })
            .collect();
        let s = value_bars(&bars, "GB/s").unwrap();
        // The margins, the axis with its title, and 30 px a row.
        let height = 2 * BAR_MARGIN + BAR_X_AREA + 3 * 30;
        assert!(s.contains(&format!("height=\"{height}\"")), "{s}");
        let drawn = bars_of(&s);
        assert_eq!(drawn.len(), 3);
        for (b, (top, height, width)) in bars.iter().zip(&drawn) {
            assert!(*height > 0.0, "{drawn:?}");
            let middle = top + height / 2.0;
            let label = text_y(&s, &b.label).unwrap();
            let note = text_y(&s, &b.note).unwrap();
            assert!(
                (label - middle).abs() <= 2.0,
                "{}: {label} vs {middle}",
                b.label
            );
            assert!(
                (note - middle).abs() <= 2.0,
                "{}: {note} vs {middle}",
                b.note
            );
            // As long as its value: 100 is twice 50.
            assert!(
                (width / drawn[0].2 - b.value / 100.0).abs() < 0.02,
                "{drawn:?}"
            );
        }
        // Top to bottom as given.
        assert!(
            drawn[0].0 < drawn[1].0 && drawn[1].0 < drawn[2].0,
            "{drawn:?}"
        );
    }

    #[test]
    fn the_axis_reaches_past_the_longest_bar() {
        let one = |v: f64| ValueBar {
            label: "m".into(),
            value: v,
            note: String::new(),
            color: gpu_color(0).into(),
        };
        // Value bars: the axis is 1.25 times the largest value.
        let s = value_bars(&[one(80.0), one(40.0)], "GB/s").unwrap();
        let share = bars_of(&s)[0].2 / axis_length(&s);
        assert!((share - 1.0 / 1.25).abs() < 0.02, "{share}");
        // Ratio bars: 1.18 times the largest ratio, or 100%.
        let bar = |r: f64| Bar {
            label: "x".into(),
            ratio: r,
            note: String::new(),
            attainable: None,
            status: None,
        };
        let s = ratio_bars(&[bar(0.5), bar(0.25)]).unwrap();
        let share = bars_of(&s)[0].2 / axis_length(&s);
        assert!((share - 0.5 / 1.18).abs() < 0.02, "{share}");
        let s = ratio_bars(&[bar(1.5)]).unwrap();
        let share = bars_of(&s)[0].2 / axis_length(&s);
        assert!((share - 1.0 / 1.18).abs() < 0.02, "{share}");
        // Nothing to draw: no value that is a number of at least 0.
        assert!(value_bars(&[one(-1.0)], "GB/s").is_err());
        assert!(value_bars(&[one(f64::INFINITY)], "GB/s").is_err());
        assert!(value_bars(&[one(f64::NAN)], "GB/s").is_err());
    }

    #[test]
    fn one_bar_is_drawn_as_wide_as_its_value() {
        // One row: a compare chart where one machine has the figure, the audit's ratio chart
        // with one figure.
        let one = vec![ValueBar {
            label: "full".into(),
            value: 55.3,
            note: "55.3 GB/s".into(),
            color: gpu_color(0).into(),
        }];
        let s = value_bars(&one, "GB/s").unwrap();
        let w = bar_widths(&s);
        assert_eq!(w.len(), 1, "{s}");
        assert!(w[0] > 100.0, "{w:?}");
        assert_eq!(s.matches(">\nfull\n<").count(), 1, "its label, once: {s}");
        let s = ratio_bars(&[Bar {
            label: "memory copy".into(),
            ratio: 0.89,
            note: "89%".into(),
            attainable: None,
            status: None,
        }])
        .unwrap();
        assert!(bar_widths(&s).iter().any(|w| *w > 100.0), "{s}");
        // Two rows: as wide as their values, in proportion.
        let mut two = one.clone();
        two.push(ValueBar {
            label: "x8".into(),
            value: 27.65,
            note: "27.7 GB/s".into(),
            color: gpu_color(1).into(),
        });
        let w = bar_widths(&value_bars(&two, "GB/s").unwrap());
        assert_eq!(w.len(), 2, "{w:?}");
        assert!((w[0] / w[1] - 2.0).abs() < 0.05, "{w:?}");
        // A hostname's control characters are written out, not passed to the page.
        two[1].label = "x8\u{1b}]0;owned\u{7}".into();
        two[1].note = "\r27.7".into();
        let s = value_bars(&two, "GB/s").unwrap();
        assert!(!s.chars().any(|c| c.is_control() && c != '\n'), "{s:?}");
        assert!(s.contains("x8\\x1b]0;owned\\x07"), "{s}");
    }

    #[test]
    fn sizes_are_labelled_in_binary_units() {
        assert_eq!(size_label(12.0), "4 KiB");
        assert_eq!(size_label(30.0), "1 GiB");
        assert_eq!(size_label(12.5), "");
        let line = Line {
            name: "GPU 0".into(),
            color: gpu_color(0).into(),
            points: vec![(4096.0, 3.0), (1048576.0, 40.0), (1073741824.0, 55.0)],
            faint: false,
        };
        let s = by_size(&[line], "GB/s").unwrap();
        assert!(s.contains("1 GiB") && s.contains("4 KiB"), "{s}");
        assert!(count(&s, "polyline") >= 1, "{s}");
        let one = Line {
            name: "x".into(),
            color: "#000000".into(),
            points: vec![(4096.0, 3.0)],
            faint: false,
        };
        assert!(by_size(&[one], "GB/s").is_err());
    }

    #[test]
    fn heat_map_has_a_cell_per_pair_and_grey_diagonal() {
        let cells = vec![(0, 1, 396.8, 0.9), (1, 0, 396.9, 0.95)];
        let s = heat_map(&[0, 1], &cells).unwrap();
        assert!(s.contains(">\n397\n<") || s.contains("397"), "{s}");
        assert!(s.contains("GPU 0") && s.contains("GPU 1"));
        // 4 cells (2 measured, 2 diagonal) and the background.
        assert!(count(&s, "rect") >= 5, "{s}");
        assert!(s.contains("#EEEEEE"), "{s}");
        assert!(heat_map(&[0], &[]).is_err());
    }

    #[test]
    fn timeline_has_its_panels_and_events() {
        let line = |v: f64| Line {
            name: "GPU 0".into(),
            color: gpu_color(0).into(),
            points: (0..50).map(|i| (i as f64 * 0.2, v)).collect(),
            faint: false,
        };
        let panels = vec![
            Panel {
                y_label: "SM clock (MHz)".into(),
                lines: vec![line(1755.0)],
                references: vec![],
            },
            Panel {
                y_label: "power (W)".into(),
                lines: vec![line(690.0)],
                references: vec![],
            },
        ];
        let events = vec![Event {
            row: 0,
            from_s: 2.0,
            to_s: 4.0,
            color: "#d55e00".into(),
        }];
        let s = timeline(10.0, &panels, &[0], &events).unwrap();
        assert!(
            s.contains("SM clock (MHz)") && s.contains("power (W)"),
            "{s}"
        );
        assert!(s.contains("#D55E00"), "{s}");
        let empty = vec![Panel {
            y_label: "x".into(),
            lines: vec![],
            references: vec![],
        }];
        assert!(timeline(10.0, &empty, &[0], &[]).is_err());
    }

    /// 1.7e308 (from a report someone made) built an axis of 0..inf, whose ticks never end.
    #[test]
    fn figures_past_the_drawable_range_are_left_out_with_a_note() {
        let bar = |ratio: f64| Bar {
            label: "x".into(),
            ratio,
            note: "n".into(),
            attainable: None,
            status: None,
        };
        let svg = ratio_bars(&[bar(1.7e308), bar(f64::NAN), bar(0.9)]).unwrap();
        assert_eq!(svg.matches("(not drawn: out of range)").count(), 2, "{svg}");
        let drawn: Vec<f64> = bar_widths(&svg).into_iter().filter(|w| *w > 1.0).collect();
        assert_eq!(drawn.len(), 1, "only the drawable bar: {drawn:?}");
        let value = |value: f64| ValueBar {
            label: "m".into(),
            value,
            note: "v".into(),
            color: "#000000".into(),
        };
        let svg = value_bars(&[value(f64::MAX), value(55.0)], "GB/s").unwrap();
        assert!(svg.contains("v (not drawn: out of range)"), "{svg}");
        assert!(value_bars(&[value(1.7e308)], "GB/s").is_err());
        let line = Line {
            name: "l".into(),
            color: "#000000".into(),
            points: vec![
                (4096.0, 1.0),
                (1e300, 1.7e308),
                (f64::INFINITY, 2.0),
                (65536.0, 2.0),
            ],
            faint: false,
        };
        by_size(std::slice::from_ref(&line), "GB/s").unwrap();
        let panel = Panel {
            y_label: "W".into(),
            lines: vec![Line {
                points: vec![(0.0, 1.0), (1.0, 1.7e308), (2.0, 3.0)],
                ..line
            }],
            references: vec![Reference {
                label: "r".into(),
                value: f64::INFINITY,
            }],
        };
        let events = [Event {
            row: 0,
            from_s: 0.0,
            to_s: f64::INFINITY,
            color: "#000000".into(),
        }];
        timeline(1.7e308, &[panel], &[0], &events).unwrap();
    }

    /// A text element of an SVG: its content, where plotters put it, its size and anchors.
    #[derive(Debug)]
    struct Label {
        text: String,
        x: f64,
        y: f64,
        size: f64,
        anchor: String,
        dy: String,
        rotated: bool,
    }

    fn labels(svg: &str) -> Vec<Label> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| {
                let (open, rest) = t.split_once('>')?;
                let text = rest.split('<').next()?.trim().to_string();
                let s = |k: &str| -> Option<String> {
                    Some(
                        open.split(&format!(" {k}=\""))
                            .nth(1)?
                            .split('"')
                            .next()?
                            .to_string(),
                    )
                };
                Some(Label {
                    text,
                    x: s("x")?.parse().ok()?,
                    y: s("y")?.parse().ok()?,
                    size: s("font-size")?.parse().ok()?,
                    anchor: s("text-anchor")?,
                    dy: s("dy")?,
                    rotated: open.contains("rotate("),
                })
            })
            .collect()
    }

    /// About the box a label's glyphs fill: (left, top, right, bottom). Plotters writes the
    /// vertical anchor as `dy`: 0.76em (top: the glyphs from y down one em), 0.5ex (centre)
    /// and -0.5ex (bottom: the glyphs end at y); the width is [`text_width`]'s estimate.
    fn glyph_box(l: &Label) -> (f64, f64, f64, f64) {
        let w = text_width(&l.text, l.size);
        let left = match l.anchor.as_str() {
            "end" => l.x - w,
            "middle" => l.x - w / 2.0,
            _ => l.x,
        };
        let top = match l.dy.as_str() {
            "0.76em" => l.y,
            "0.5ex" => l.y - l.size / 2.0,
            _ => l.y - l.size,
        };
        (left, top, left + w, top + l.size)
    }

    /// The axis title `title` of `svg` keeps clear of every other unrotated text: at 28 px
    /// of label area "measured / expected" was drawn over the "60%" tick (issue 23).
    fn title_is_clear(svg: &str, title: &str) {
        let all = labels(svg);
        let t = all
            .iter()
            .find(|l| l.text == title)
            .unwrap_or_else(|| panic!("no title {title}: {svg}"));
        let (l0, t0, r0, b0) = glyph_box(t);
        let mut ticks = 0;
        for other in all.iter().filter(|l| l.text != title && !l.rotated) {
            let (l1, t1, r1, b1) = glyph_box(other);
            // A tick label in the row above the title.
            ticks += usize::from(b1 <= t0 && t1 > t0 - 40.0);
            let overlaps = l1 < r0 && l0 < r1 && t1 < b0 && t0 < b1;
            assert!(
                !overlaps,
                "{title:?} at {:?} over {:?} at {:?}",
                (l0, t0, r0, b0),
                other.text,
                (l1, t1, r1, b1)
            );
            // The gap under a tick label above the title.
            if l1 < r0 && l0 < r1 && b1 <= t0 {
                assert!(
                    t0 - b1 >= 2.0,
                    "{title:?} {} px under {:?}",
                    t0 - b1,
                    other.text
                );
            }
        }
        assert!(
            ticks > 0,
            "{title:?}: no tick label above it to be clear of"
        );
    }

    #[test]
    fn axis_titles_sit_below_their_tick_labels() {
        let bar = |ratio: f64| Bar {
            label: "memory copy".into(),
            ratio,
            note: format!("{:.0}%", ratio * 100.0),
            attainable: None,
            status: None,
        };
        title_is_clear(
            &ratio_bars(&[bar(0.89), bar(0.6)]).unwrap(),
            "measured / expected",
        );
        let value = |v: f64| ValueBar {
            label: "host".into(),
            value: v,
            note: format!("{v} GB/s"),
            color: gpu_color(0).into(),
        };
        title_is_clear(
            &value_bars(&[value(40.0), value(55.0)], "GB/s").unwrap(),
            "GB/s",
        );
        let line = Line {
            name: "GPU 0".into(),
            color: gpu_color(0).into(),
            points: vec![(4096.0, 3.0), (1048576.0, 40.0), (1073741824.0, 55.0)],
            faint: false,
        };
        title_is_clear(&by_size(&[line], "GB/s").unwrap(), "copy size");
        let panel = Panel {
            y_label: "power (W)".into(),
            lines: vec![Line {
                name: "GPU 0".into(),
                color: gpu_color(0).into(),
                points: (0..60).map(|i| (f64::from(i), 690.0)).collect(),
                faint: false,
            }],
            references: vec![],
        };
        let s = timeline(60.0, &[panel], &[0], &[]).unwrap();
        title_is_clear(&s, "time since the burn began");
    }

    /// The charts' text is drawn at the size asked: plotters' SVG writes 1/1.24 of its font
    /// size, which made the notes 9.7 px and the burn's ticks 8.9 (issue 23).
    #[test]
    fn chart_text_is_drawn_at_its_size_in_pixels() {
        let s = ratio_bars(&[Bar {
            label: "GEMM bf16".into(),
            ratio: 0.82,
            note: "82%".into(),
            attainable: None,
            status: None,
        }])
        .unwrap();
        let all = labels(&s);
        for text in ["82%", "GEMM bf16", "measured / expected", "40%"] {
            let l = all.iter().find(|l| l.text == text).unwrap();
            assert!((l.size - TEXT_PX).abs() < 0.01, "{text}: {}", l.size);
        }
        assert_eq!((TEXT_PX, SMALL_PX), (14.0, 13.0));
    }

    /// Pinned: a note starts NOTE_GAP (6 px) after its bar; one that would come within
    /// NOTE_CLEAR (3 px) of a line starts 6 px after the line; the axis grows by 5% steps until
    /// every note ends inside the plot.
    #[test]
    fn notes_keep_clear_of_their_bar_and_of_the_lines() {
        assert_eq!((NOTE_GAP, NOTE_CLEAR), (6.0, 3.0));
        let plot = 600.0;
        // Far from the line: 6 px after the bar's end.
        let (top, off) = plan_notes(&[0.5], &[30.0], &[vec![1.0]], 1.18, plot);
        assert_eq!(top, 1.18);
        assert_eq!(off, vec![6.0]);
        // "99%" on a bar that ends 5 px before the 100% line: past the line.
        let line_px = 1.0 / 1.18 * plot;
        let end = (line_px - 5.0) / plot * 1.18;
        let (_, off) = plan_notes(&[end], &[30.0], &[vec![1.0]], 1.18, plot);
        let start = line_px - 5.0 + off[0];
        assert!(
            (start - (line_px + NOTE_GAP)).abs() < 1e-6,
            "{start} vs {line_px}"
        );
        // Ending just clear of the line (3 px and more before it) it stays at its bar.
        let end = (line_px - NOTE_GAP - 30.0 - NOTE_CLEAR - 0.5) / plot * 1.18;
        let (_, off) = plan_notes(&[end], &[30.0], &[vec![1.0]], 1.18, plot);
        assert_eq!(off, vec![6.0]);
        // A bar past the line: the line is behind it, the note 6 px after the bar.
        let (_, off) = plan_notes(&[1.1], &[30.0], &[vec![1.0]], 1.5, plot);
        assert_eq!(off, vec![6.0]);
        // Two lines: past both where the first pushes it onto the second.
        let (_, off) = plan_notes(&[0.79], &[30.0], &[vec![0.8, 0.83]], 1.18, plot);
        let px = |x: f64| x / 1.18 * plot;
        assert!(
            (px(0.79) + off[0] - (px(0.83) + NOTE_GAP)).abs() < 1e-6,
            "{off:?}"
        );
        // A long note: the axis reaches further, 5% at a time, until it fits.
        let (top, off) = plan_notes(&[1.0], &[200.0], &[vec![1.0]], 1.18, plot);
        assert!(top > 1.18, "{top}");
        let steps = (top / 1.18).ln() / 1.05f64.ln();
        assert!((steps - steps.round()).abs() < 1e-6, "{steps}");
        assert!(1.0 / top * plot + off[0] + 200.0 <= plot);
        assert!(
            1.0 / (top / 1.05) * plot + NOTE_GAP + 200.0 > plot,
            "one step less fits"
        );
    }

    /// In the SVG: the note of a bar at 99% is right of the 100% line; each note ends within
    /// the chart, also "(lowest: GPU 12)" on the longest bar.
    #[test]
    fn a_note_by_the_hundred_percent_line_is_written_past_it() {
        let bar = |ratio: f64, note: &str| Bar {
            label: "burn power, median".into(),
            ratio,
            note: note.into(),
            attainable: None,
            status: None,
        };
        let s = ratio_bars(&[bar(0.99, "99%"), bar(1.12, "112% (lowest: GPU 12)")]).unwrap();
        let all = labels(&s);
        let line = all.iter().find(|l| l.text == "100%").unwrap().x;
        let note = all.iter().find(|l| l.text == "99%").unwrap();
        assert!(
            note.x >= line + NOTE_GAP - 1.0,
            "{} vs the line at {line}",
            note.x
        );
        for l in &all {
            let (left, _, right, _) = glyph_box(l);
            assert!(
                left >= 0.0 && right <= f64::from(WIDTH),
                "{l:?} leaves the chart"
            );
        }
    }

    /// Pinned: a burn panel's axis starts at 0 and ends 15% over the highest of its values
    /// and references; with a negative value 5% of the range below it.
    #[test]
    fn burn_panels_start_at_zero_and_reach_past_their_reference_lines() {
        assert_eq!(PANEL_HEADROOM, 0.15);
        let near = |(a, b): (f64, f64), (c, d): (f64, f64)| {
            assert!(
                (a - c).abs() < 1e-9 && (b - d).abs() < 1e-9,
                "{a}..{b}, not {c}..{d}"
            );
        };
        let clock = [1450.0, 1515.0, 1600.0];
        near(panel_range(&clock, &[]), (0.0, 1600.0 * 1.15));
        near(panel_range(&clock, &[1980.0]), (0.0, 1980.0 * 1.15));
        // A reference below the values changes nothing.
        near(panel_range(&clock, &[700.0]), (0.0, 1600.0 * 1.15));
        // -10..30: 2 (5% of 40) below, 15% of 42 above.
        near(
            panel_range(&[-10.0, 30.0], &[]),
            (-12.0, 30.0 + 42.0 * 0.15),
        );
        near(panel_range(&[0.0, 0.0], &[]), (0.0, 1.15));
        near(
            panel_range(&[f64::NAN, 50.0], &[f64::INFINITY]),
            (0.0, 50.0 * 1.15),
        );
        // The clock's ±50 MHz is a few percent of the panel, not all of it.
        let (lo, hi) = panel_range(&clock, &[1980.0]);
        assert!((1600.0 - 1450.0) / (hi - lo) < 0.1);
    }

    #[test]
    fn burn_panels_draw_their_reference_lines_with_labels() {
        let line = |v: f64| Line {
            name: "GPU 0".into(),
            color: gpu_color(0).into(),
            points: (0..60).map(|i| (f64::from(i), v)).collect(),
            faint: false,
        };
        let reference = |label: &str, value: f64| Reference {
            label: label.into(),
            value,
        };
        let panels = [
            Panel {
                y_label: "SM clock (MHz)".into(),
                lines: vec![line(1515.0)],
                references: vec![reference("boost clock 1980 MHz", 1980.0)],
            },
            Panel {
                y_label: "power (W)".into(),
                lines: vec![line(690.0)],
                // Two limits 5 W apart: two lines, one label (they would overlap).
                references: vec![
                    reference("power limit 700 W (GPU 0)", 700.0),
                    reference("power limit 705 W (GPU 1)", 705.0),
                ],
            },
        ];
        let s = timeline(60.0, &panels, &[0], &[]).unwrap();
        let all = labels(&s);
        let boost = all
            .iter()
            .find(|l| l.text == "boost clock 1980 MHz")
            .unwrap();
        // Written above its line, at the right: under the panel's top (its headroom).
        assert_eq!(boost.anchor, "end");
        assert!(boost.y > 8.0, "{boost:?}");
        assert!(all.iter().any(|l| l.text == "power limit 700 W (GPU 0)"));
        assert!(
            !all.iter().any(|l| l.text == "power limit 705 W (GPU 1)"),
            "{s}"
        );
        // The axis begins at 0: its lowest tick label is "0".
        assert!(all.iter().filter(|l| l.text == "0").count() >= 2, "{s}");
    }
}
