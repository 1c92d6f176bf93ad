//! The PNG graphs of `/q?png` (spec: query §6.17): what OpenTSDB 2.4 asks Gnuplot to draw, drawn in-process.
//!
//! OpenTSDB writes one data file per result and a Gnuplot script (`set term png small size W,H`, the time x
//! axis over [start, end], `set key right box`, one `plot` clause per result titled `metric{tags}`, the `o=`
//! options appended) and runs `gnuplot`. rtsd keeps the inputs ([`PlotOptions`] holds the parameters the graph
//! form sends, already validated as OpenTSDB validates them) and draws with `plotters` into an RGB buffer,
//! encoded with `png`. Text uses a font compiled into the binary (DejaVu Sans Mono, `DejaVuSansMono.LICENSE`),
//! so a bare machine renders the same image as a desktop.
//!
//! Nothing here does I/O or reads the store: [`render_png`] takes the series and the options.
use std::sync::Once;

use plotters::chart::DualCoordChartContext;
use plotters::coord::cartesian::Cartesian2d;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, RGBColor};

/// The font every label is drawn with, registered with plotters under the family name [`FAMILY`].
static FONT: &[u8] = include_bytes!("DejaVuSansMono.ttf");
const FAMILY: &str = "sans-serif";

/// OpenTSDB's default graph size (`Plot`'s 1024x768) and the smallest side it accepts.
pub const DEFAULT_SIZE: (u32, u32) = (1024, 768);
pub const MIN_SIDE: u32 = 100;
/// rtsd's bound on one graph's pixels (OpenTSDB's is Java's `short`, 32767x32767: 3 GB of RGB). 4096x4096 is
/// 48 MB while it is drawn.
pub const MAX_PIXELS: u64 = 4096 * 4096;

/// Gnuplot 5's default line colours, in order (its `linetype` 1-8), so graphs look like OpenTSDB's.
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(0x94, 0x00, 0xd3),
    RGBColor(0x00, 0x9e, 0x73),
    RGBColor(0x56, 0xb4, 0xe9),
    RGBColor(0xe6, 0x9f, 0x00),
    RGBColor(0xf0, 0xe4, 0x42),
    RGBColor(0x00, 0x72, 0xb2),
    RGBColor(0xe5, 0x1e, 0x10),
    RGBColor(0x00, 0x00, 0x00),
];

/// How points are drawn (`style=`, or `with ...` in an `o=` option).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Style {
    /// Gnuplot's `linespoints`, OpenTSDB's default (`set style data linespoint`).
    #[default]
    LinesPoints,
    Lines,
    Points,
    Circles,
    Dots,
}

impl Style {
    /// The style a gnuplot word names (`linespoint`, `lines`, `points`, `circles`, `dots`; `lp`, `l`, `p`).
    pub fn from_word(w: &str) -> Option<Style> {
        Some(match w {
            "linespoint" | "linespoints" | "lp" => Style::LinesPoints,
            "lines" | "l" => Style::Lines,
            "points" | "p" => Style::Points,
            "circles" => Style::Circles,
            "dots" => Style::Dots,
            _ => return None,
        })
    }
}

/// Gnuplot's `smooth` options. Gnuplot plots each result's points sorted by time, so `unique`, `frequency`,
/// `zsort`, `unwrap` and `bins` leave OpenTSDB's data (one value per timestamp) as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Smooth {
    /// `csplines`, `acsplines`, `mcsplines`: a smooth curve through the points (monotone cubic here).
    Spline,
    /// `bezier`, `sbezier`: the Bézier curve whose control points are the data.
    Bezier,
    /// `cumulative`: running sums.
    Cumulative,
    /// `cnormal`: running sums divided by the total.
    CumulativeNormal,
    /// `fnormal`: each value divided by the total.
    Normal,
    /// The rest: the points as they are.
    AsIs,
}

impl Smooth {
    pub fn from_word(w: &str) -> Option<Smooth> {
        Some(match w {
            "csplines" | "acsplines" | "mcsplines" => Smooth::Spline,
            "bezier" | "sbezier" => Smooth::Bezier,
            "cumulative" => Smooth::Cumulative,
            "cnormal" => Smooth::CumulativeNormal,
            "fnormal" => Smooth::Normal,
            "unique" | "frequency" | "bins" | "unwrap" | "zsort" => Smooth::AsIs,
            _ => return None,
        })
    }
}

/// Where the legend goes (`key=` words; `nokey` hides it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub shown: bool,
    /// (vertical, horizontal): -1 top / left, 0 center, 1 bottom / right.
    pub position: (i8, i8),
    pub boxed: bool,
}

impl Default for Key {
    /// `set key right box`: top right, boxed.
    fn default() -> Key {
        Key { shown: true, position: (-1, 1), boxed: true }
    }
}

impl Key {
    /// Reads gnuplot's `set key` words (`left`, `right`, `center`, `top`, `bottom`, `box`, `out`, `horiz`);
    /// `out` and `horiz` keep the legend inside the plot here.
    pub fn from_words(words: &str) -> Key {
        let (mut horizontal, mut vertical, mut boxed) = ("right", "top", false);
        for w in words.split_whitespace() {
            match w {
                "left" | "right" => horizontal = w,
                "top" | "bottom" => vertical = w,
                "center" => {
                    horizontal = "center";
                    vertical = "center";
                }
                "box" => boxed = true,
                _ => {}
            }
        }
        let v = match vertical {
            "top" => -1,
            "bottom" => 1,
            _ => 0,
        };
        let h = match horizontal {
            "left" => -1,
            "right" => 1,
            _ => 0,
        };
        Key { shown: true, position: (v, h), boxed }
    }

    fn label_position(&self) -> SeriesLabelPosition {
        use SeriesLabelPosition::*;
        match self.position {
            (-1, -1) => UpperLeft,
            (-1, 0) => UpperMiddle,
            (-1, _) => UpperRight,
            (1, -1) => LowerLeft,
            (1, 0) => LowerMiddle,
            (1, _) => LowerRight,
            (_, -1) => MiddleLeft,
            (_, 1) => MiddleRight,
            _ => MiddleMiddle,
        }
    }
}

/// One axis' range: `[min:max]`, either side empty for automatic.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Range {
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl Range {
    /// Parses gnuplot's `[min:max]` (sides may be quoted or empty). `None` when it is not that shape.
    pub fn parse(s: &str) -> Option<Range> {
        let inner = s.trim().strip_prefix('[')?.strip_suffix(']')?;
        let (lo, hi) = inner.split_once(':')?;
        let side = |v: &str| -> Option<Option<f64>> {
            let v = v.trim().trim_matches('"');
            if v.is_empty() || v == "*" {
                return Some(None);
            }
            v.parse::<f64>().ok().filter(|f| f.is_finite()).map(Some)
        };
        Some(Range { min: side(lo)?, max: side(hi)? })
    }
}

/// Everything the graph form can ask for, validated.
#[derive(Debug, Clone)]
pub struct PlotOptions {
    pub width: u32,
    pub height: u32,
    /// The x range, epoch seconds (the query's start and end).
    pub start_s: i64,
    pub end_s: i64,
    /// Time labels are drawn in this zone (`tz=`, else the server's, as OpenTSDB's `Plot` does).
    pub zone: jiff::tz::TimeZone,
    pub title: Option<String>,
    pub ylabel: Option<String>,
    pub y2label: Option<String>,
    pub yrange: Range,
    pub y2range: Range,
    pub ylog: bool,
    pub y2log: bool,
    /// strftime-style time label format (`xformat=`); `None`: chosen from the time span as OpenTSDB does.
    pub xformat: Option<String>,
    /// gnuplot-style number formats (`yformat=`, `y2format=`), e.g. `%g`, `%s%c`.
    pub yformat: Option<String>,
    pub y2format: Option<String>,
    pub key: Key,
    pub smooth: Option<Smooth>,
    pub style: Style,
    pub background: RGBColor,
    pub foreground: RGBColor,
}

impl Default for PlotOptions {
    fn default() -> PlotOptions {
        PlotOptions {
            width: DEFAULT_SIZE.0,
            height: DEFAULT_SIZE.1,
            start_s: 0,
            end_s: 1,
            zone: jiff::tz::TimeZone::UTC,
            title: None,
            ylabel: None,
            y2label: None,
            yrange: Range::default(),
            y2range: Range::default(),
            ylog: false,
            y2log: false,
            xformat: None,
            yformat: None,
            y2format: None,
            key: Key::default(),
            smooth: None,
            style: Style::default(),
            background: RGBColor(0xff, 0xff, 0xff),
            foreground: RGBColor(0, 0, 0),
        }
    }
}

/// One line of the graph: a result of the query, with its `o=` option applied.
#[derive(Debug, Clone, Default)]
pub struct PlotSeries {
    /// The legend text, OpenTSDB's `metric{tag=value, ...}`.
    pub title: String,
    /// (epoch seconds, value), ascending; NaN already left out.
    pub points: Vec<(i64, f64)>,
    /// Plotted against the right-hand axis (`axis x1y2` in its `o=`).
    pub right_axis: bool,
    /// `with <style>` in its `o=`.
    pub style: Option<Style>,
}

impl PlotSeries {
    /// Applies the parts of a gnuplot `o=` option rtsd understands: `axis x1y2` / `axes x1y2` and
    /// `with <style>`; the rest (line widths, colours) is accepted and ignored.
    pub fn apply_option(&mut self, option: &str) {
        self.right_axis = option.contains("x1y2");
        let words: Vec<&str> = option.split_whitespace().collect();
        if let Some(i) = words.iter().position(|w| *w == "with" || *w == "w") {
            self.style = words.get(i + 1).and_then(|w| Style::from_word(w));
        }
    }
}

/// OpenTSDB's colour parameters: `xRRGGBB`.
pub fn parse_color(s: &str) -> Option<RGBColor> {
    let hex = s.strip_prefix(['x', 'X'])?;
    if hex.len() != 6 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let n = u32::from_str_radix(hex, 16).ok()?;
    Some(RGBColor((n >> 16) as u8, (n >> 8) as u8, n as u8))
}

/// Draws the graph and returns the PNG file.
pub fn render_png(options: &PlotOptions, series: &[PlotSeries]) -> Result<Vec<u8>, String> {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        // The font is compiled in and known to parse; a failure would only leave text undrawn.
        let _ = plotters::style::register_font(FAMILY, FontStyle::Normal, FONT);
    });
    let (w, h) = (options.width, options.height);
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        draw(&root, options, series).map_err(|e| format!("Unable to draw the graph: {e}"))?;
        root.present().map_err(|e| format!("Unable to draw the graph: {e}"))?;
    }
    let mut out = Vec::with_capacity(rgb.len() / 8);
    {
        let mut encoder = png::Encoder::new(&mut out, w, h);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().map_err(|e| e.to_string())?;
        writer.write_image_data(&rgb).map_err(|e| e.to_string())?;
    }
    Ok(out)
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// One axis after smoothing and log scaling: the values to plot and the range they are drawn in.
struct Axis {
    range: (f64, f64),
    log: bool,
}

/// Points as drawn: smoothed, then on a log axis log10 of the positive values (gnuplot skips the others).
fn plotted_lines(o: &PlotOptions, series: &[PlotSeries]) -> Vec<Vec<(f64, f64)>> {
    series
        .iter()
        .map(|s| {
            let log = if s.right_axis { o.y2log } else { o.ylog };
            let pts: Vec<(f64, f64)> =
                s.points.iter().filter(|p| p.1.is_finite()).map(|&(t, v)| (t as f64, v)).collect();
            let pts = smooth(&pts, o.smooth, o.width as usize);
            if log {
                pts.into_iter().filter(|p| p.1 > 0.0).map(|(x, y)| (x, y.log10())).collect()
            } else {
                pts
            }
        })
        .collect()
}

/// The left (or `right`) axis' range: `range` where given, else the drawn values' padded as gnuplot does.
fn axis(lines: &[Vec<(f64, f64)>], series: &[PlotSeries], right: bool, range: Range, log: bool) -> Axis {
    let values = lines.iter().zip(series).filter(|(_, s)| s.right_axis == right).flat_map(|(l, _)| l.iter());
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for &(_, y) in values {
        lo = lo.min(y);
        hi = hi.max(y);
    }
    // With no data Gnuplot is told `yrange [0:10]` (OpenTSDB's `Plot.dumpToFiles`).
    if !lo.is_finite() {
        (lo, hi) = (0.0, 10.0);
    } else if lo == hi {
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        (lo, hi) = (lo - pad, hi + pad);
    } else {
        let pad = (hi - lo) * 0.05;
        (lo, hi) = (lo - pad, hi + pad);
    }
    let scale = |v: f64| if log { v.max(f64::MIN_POSITIVE).log10() } else { v };
    let mut r = (range.min.map_or(lo, scale), range.max.map_or(hi, scale));
    // Values near f64::MAX overflow the padding: keep the range drawable.
    if !r.0.is_finite() || !r.1.is_finite() {
        r = (r.0.clamp(-f64::MAX / 4.0, f64::MAX / 4.0), r.1.clamp(-f64::MAX / 4.0, f64::MAX / 4.0));
    }
    if r.0 == r.1 {
        r.1 = r.0 + 1.0;
    }
    if r.0 > r.1 {
        r = (r.1, r.0);
    }
    Axis { range: r, log }
}

/// A time tick's label in `format` (strftime) and `zone`.
fn time_label(format: String, zone: &jiff::tz::TimeZone) -> impl Fn(&f64) -> String {
    let zone = zone.clone();
    move |x: &f64| -> String {
        let Ok(ts) = jiff::Timestamp::from_second(*x as i64) else { return String::new() };
        jiff::fmt::strtime::format(format.as_str(), &ts.to_zoned(zone.clone()))
            .unwrap_or_else(|_| (*x as i64).to_string())
    }
}

/// A y label in `format` (gnuplot's) or `%g`; on a log axis the value is 10 to the drawn one.
fn y_label(format: &Option<String>, log: bool) -> impl Fn(&f64) -> String {
    let format = format.clone();
    move |y: &f64| {
        let v = if log { 10f64.powf(*y) } else { *y };
        match &format {
            Some(f) => gnuplot_format(f, v),
            None => format_g(v),
        }
    }
}

fn draw(root: &DrawingArea<BitMapBackend<'_>, Shift>, o: &PlotOptions, series: &[PlotSeries]) -> DrawResult {
    root.fill(&o.background)?;
    let fg = o.foreground;
    let font = |size: f64| (FAMILY, size).into_font().color(&fg);
    // Even sizes: plotters places glyphs at `size / 2 + top` truncated to whole pixels, so an odd size moves
    // letters and punctuation by different half pixels (a raised `.` in every metric name).
    let small = font(12.0);

    let x0 = o.start_s as f64;
    let x1 = (o.end_s as f64).max(x0 + 1.0);
    let lines = plotted_lines(o, series);
    let any_points = lines.iter().any(|l| !l.is_empty());
    let left = axis(&lines, series, false, o.yrange, o.ylog);
    let right = axis(&lines, series, true, o.y2range, o.y2log);
    let dual = series.iter().any(|s| s.right_axis);

    let mut builder = ChartBuilder::on(root);
    builder.margin(12).x_label_area_size(44).y_label_area_size(if o.ylabel.is_some() { 84 } else { 64 });
    if dual {
        builder.right_y_label_area_size(if o.y2label.is_some() { 84 } else { 64 });
    }
    if let Some(t) = &o.title {
        builder.caption(t, font(16.0));
    }
    // The secondary coordinates take over the right-hand label area before the primary mesh is drawn, so the
    // left axis' labels are not repeated on the right.
    let mut chart = builder
        .build_cartesian_2d(x0..x1, left.range.0..left.range.1)?
        .set_secondary_coord(x0..x1, right.range.0..right.range.1);

    let left_label = y_label(&o.yformat, left.log);
    let y_labels = ((o.height / 60) as usize).clamp(2, 12);
    let mut mesh = chart.configure_mesh();
    // Time ticks are drawn below, on whole minutes, hours or days of the zone (plotters' would fall anywhere).
    mesh.disable_x_mesh()
        .x_labels(0)
        .y_labels(y_labels)
        .y_label_formatter(&left_label)
        .label_style(small.clone())
        .axis_desc_style(font(14.0))
        .axis_style(fg)
        .bold_line_style(fg.mix(0.15))
        .light_line_style(TRANSPARENT);
    if let Some(l) = &o.ylabel {
        mesh.y_desc(l.as_str());
    }
    mesh.draw()?;
    draw_time_ticks(root, &mut chart, o, (x0, x1), left.range, &small)?;

    if dual {
        let right_label = y_label(&o.y2format, right.log);
        let mut axes = chart.configure_secondary_axes();
        axes.y_labels(y_labels).y_label_formatter(&right_label).label_style(small.clone()).axis_style(fg);
        if let Some(l) = &o.y2label {
            axes.y_desc(l.as_str());
        }
        axes.draw()?;
    }

    draw_lines(&mut chart, o, series, &lines)?;

    if series.is_empty() || !any_points {
        // Gnuplot's `set label "No data" at graph 0.5,0.9 center` (OpenTSDB sets it when nothing matched).
        let (w, h) = root.dim_in_pixel();
        let style = font(14.0).pos(plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Center,
            plotters::style::text_anchor::VPos::Center,
        ));
        root.draw(&Text::new("No data", (w as i32 / 2, (h as f64 * 0.15) as i32), style))?;
    } else if o.key.shown {
        let mut labels = chart.configure_series_labels();
        labels.position(o.key.label_position()).label_font(small).background_style(o.background.mix(0.85));
        if o.key.boxed {
            labels.border_style(fg);
        }
        labels.draw()?;
    }
    Ok(())
}

/// The chart `draw` builds: time on x, the left axis' values and the right axis' (secondary) values on y.
type Chart<'a, 'b> = DualCoordChartContext<'a, BitMapBackend<'b>, Xy, Xy>;
type Xy = Cartesian2d<RangedCoordf64, RangedCoordf64>;

/// The time axis: on every whole step of the zone (minutes, hours, days; plotters' own ticks would fall
/// anywhere) a light grid line, a tick and its label in `xformat`, or the format OpenTSDB picks for the span.
fn draw_time_ticks<'b>(
    root: &DrawingArea<BitMapBackend<'b>, Shift>,
    chart: &mut Chart<'_, 'b>,
    o: &PlotOptions,
    (x0, x1): (f64, f64),
    (y_lo, y_hi): (f64, f64),
    small: &TextStyle<'_>,
) -> DrawResult {
    let fg = o.foreground;
    let span = (x1 - x0) as i64;
    let time_label = time_label(o.xformat.clone().unwrap_or_else(|| default_time_format(span).to_string()), &o.zone);
    let step = time_step(span, i64::from(o.width / 110).max(2));
    let offset =
        i64::from(jiff::Timestamp::from_second(o.start_s).map(|t| o.zone.to_offset(t).seconds()).unwrap_or_default());
    let label_style = small.pos(plotters::style::text_anchor::Pos::new(
        plotters::style::text_anchor::HPos::Center,
        plotters::style::text_anchor::VPos::Top,
    ));
    let mut t = ((o.start_s + offset).div_euclid(step) + 1) * step - offset;
    while (t as f64) <= x1 {
        let x = t as f64;
        chart.draw_series(LineSeries::new([(x, y_lo), (x, y_hi)], fg.mix(0.15)))?;
        let (px, py) = chart.backend_coord(&(x, y_lo));
        root.draw(&PathElement::new(vec![(px, py), (px, py + 4)], fg))?;
        root.draw(&Text::new(time_label(&x), (px, py + 7), label_style.clone()))?;
        t += step;
    }
    Ok(())
}

/// Each result in its palette colour against its axis: its line and marks as its style (or the graph's) asks,
/// and its legend entry.
fn draw_lines(
    chart: &mut Chart<'_, '_>,
    o: &PlotOptions,
    series: &[PlotSeries],
    lines: &[Vec<(f64, f64)>],
) -> DrawResult {
    for (i, (s, pts)) in series.iter().zip(lines).enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let style = s.style.unwrap_or(o.style);
        let smoothed = matches!(o.smooth, Some(Smooth::Spline) | Some(Smooth::Bezier));
        let line = style == Style::Lines || style == Style::LinesPoints;
        let marks = !smoothed && style != Style::Lines;
        let legend = move |(x, y): (i32, i32)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2));
        macro_rules! plot {
            ($draw:ident) => {{
                let mut labelled = false;
                if line {
                    let a = chart.$draw(LineSeries::new(pts.iter().copied(), color.stroke_width(1)))?;
                    a.label(s.title.as_str()).legend(legend);
                    labelled = true;
                }
                if marks {
                    let elements: Vec<DynElement<'static, BitMapBackend<'_>, (f64, f64)>> = pts
                        .iter()
                        .map(|&p| match style {
                            Style::Dots => Pixel::new(p, color).into_dyn(),
                            Style::Circles => Circle::new(p, 4, color.stroke_width(1)).into_dyn(),
                            _ => Cross::new(p, 3, color.stroke_width(1)).into_dyn(),
                        })
                        .collect();
                    let a = chart.$draw(elements)?;
                    if !labelled {
                        a.label(s.title.as_str()).legend(legend);
                    }
                }
            }};
        }
        if s.right_axis {
            plot!(draw_secondary_series);
        } else {
            plot!(draw_series);
        }
    }

    Ok(())
}

/// Seconds between time ticks: the first round step that gives at most `max_ticks` over `span` seconds.
fn time_step(span: i64, max_ticks: i64) -> i64 {
    const STEPS: [i64; 22] = [
        1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800,
        2592000, 31536000,
    ];
    STEPS.into_iter().find(|s| span / s <= max_ticks).unwrap_or(31536000 * ((span / 31536000 / max_ticks) + 1))
}

/// OpenTSDB's `Plot.xFormat()`: the time label format for a span of seconds.
fn default_time_format(span: i64) -> &'static str {
    match span {
        s if s < 2100 => "%H:%M:%S",
        s if s < 86400 => "%H:%M",
        s if s < 604800 => "%a %H:%M",
        s if s < 1209600 => "%a %d %H:%M",
        s if s < 7776000 => "%b %d",
        _ => "%Y/%m/%d",
    }
}

/// Applies a `smooth` option; the curves are sampled about once per horizontal pixel.
fn smooth(points: &[(f64, f64)], how: Option<Smooth>, samples: usize) -> Vec<(f64, f64)> {
    let Some(how) = how else { return points.to_vec() };
    let total: f64 = points.iter().map(|p| p.1).sum();
    match how {
        Smooth::AsIs => points.to_vec(),
        Smooth::Cumulative | Smooth::CumulativeNormal => {
            let divisor = if how == Smooth::CumulativeNormal && total != 0.0 { total } else { 1.0 };
            let mut sum = 0.0;
            points
                .iter()
                .map(|&(x, y)| {
                    sum += y;
                    (x, sum / divisor)
                })
                .collect()
        }
        Smooth::Normal => {
            let divisor = if total != 0.0 { total } else { 1.0 };
            points.iter().map(|&(x, y)| (x, y / divisor)).collect()
        }
        Smooth::Spline => monotone_spline(points, samples),
        Smooth::Bezier => bezier(points, samples),
    }
}

/// A monotone cubic (Fritsch-Carlson) curve through the points: smooth, and never overshooting the data.
fn monotone_spline(p: &[(f64, f64)], samples: usize) -> Vec<(f64, f64)> {
    let n = p.len();
    if n < 3 {
        return p.to_vec();
    }
    let slopes: Vec<f64> = p.windows(2).map(|w| (w[1].1 - w[0].1) / (w[1].0 - w[0].0)).collect();
    let mut tangents = vec![0.0; n];
    tangents[0] = slopes[0];
    tangents[n - 1] = slopes[n - 2];
    for i in 1..n - 1 {
        tangents[i] = if slopes[i - 1] * slopes[i] <= 0.0 { 0.0 } else { (slopes[i - 1] + slopes[i]) / 2.0 };
    }
    for i in 0..n - 1 {
        if slopes[i] == 0.0 {
            tangents[i] = 0.0;
            tangents[i + 1] = 0.0;
            continue;
        }
        let (a, b) = (tangents[i] / slopes[i], tangents[i + 1] / slopes[i]);
        let s = a * a + b * b;
        if s > 9.0 {
            let t = 3.0 / s.sqrt();
            tangents[i] = t * a * slopes[i];
            tangents[i + 1] = t * b * slopes[i];
        }
    }
    let (x0, x1) = (p[0].0, p[n - 1].0);
    let steps = samples.max(n).min(20_000);
    let mut out = Vec::with_capacity(steps + 1);
    let mut seg = 0;
    for k in 0..=steps {
        let x = x0 + (x1 - x0) * k as f64 / steps as f64;
        while seg < n - 2 && x > p[seg + 1].0 {
            seg += 1;
        }
        let (xa, ya, xb, yb) = (p[seg].0, p[seg].1, p[seg + 1].0, p[seg + 1].1);
        let h = xb - xa;
        let t = if h > 0.0 { (x - xa) / h } else { 0.0 };
        let (t2, t3) = (t * t, t * t * t);
        let y = (2.0 * t3 - 3.0 * t2 + 1.0) * ya
            + (t3 - 2.0 * t2 + t) * h * tangents[seg]
            + (-2.0 * t3 + 3.0 * t2) * yb
            + (t3 - t2) * h * tangents[seg + 1];
        out.push((x, y));
    }
    out
}

/// The Bézier curve of all the points, evaluated in Bernstein form with log-space weights (no overflow for
/// thousands of points, O(n) per sample).
fn bezier(p: &[(f64, f64)], samples: usize) -> Vec<(f64, f64)> {
    let n = p.len();
    if n < 3 {
        return p.to_vec();
    }
    let degree = (n - 1) as f64;
    // ln C(n-1, i)
    let mut ln_binom = vec![0.0; n];
    for i in 1..n {
        ln_binom[i] = ln_binom[i - 1] + ((n - i) as f64).ln() - (i as f64).ln();
    }
    let steps = samples.clamp(2, 2000);
    (0..=steps)
        .map(|k| {
            let t = k as f64 / steps as f64;
            if k == 0 {
                return p[0];
            }
            if k == steps {
                return p[n - 1];
            }
            let (lt, lu) = (t.ln(), (1.0 - t).ln());
            let (mut x, mut y) = (0.0, 0.0);
            for (i, &(px, py)) in p.iter().enumerate() {
                let w = (ln_binom[i] + i as f64 * lt + (degree - i as f64) * lu).exp();
                x += w * px;
                y += w * py;
            }
            (x, y)
        })
        .collect()
}

/// Gnuplot's default tic labels (`% h`, roughly C's `%g`): up to 6 significant digits, no trailing zeros.
pub fn format_g(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let exp = v.abs().log10().floor() as i32;
    if !(-5..6).contains(&exp) {
        let s = format!("{:.5e}", v);
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let m = trim_zeros(m);
        let e: i32 = e.parse().unwrap_or(0);
        return format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    }
    let decimals = (5 - exp).max(0) as usize;
    trim_zeros(&format!("{v:.decimals$}")).to_string()
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// A gnuplot number format (`set format y "..."`): `%f`, `%e`, `%g` (with a precision), `%x`, `%s` with `%c`
/// (mantissa and SI prefix letter), `%%`; other characters as they are.
pub fn gnuplot_format(format: &str, v: f64) -> String {
    // %s / %c: v = mantissa * 1000^power, 1 <= |mantissa| < 1000.
    let power = if v == 0.0 { 0 } else { (v.abs().log10() / 3.0).floor() as i32 }.clamp(-8, 8);
    let mantissa = v / 1000f64.powi(power);
    let mut out = String::new();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = String::new();
        while let Some(&d) = chars.peek() {
            if d.is_ascii_digit() || d == '.' || d == '-' || d == '+' || d == ' ' || d == '#' {
                spec.push(d);
                chars.next();
            } else {
                break;
            }
        }
        let precision: Option<usize> = spec.split_once('.').and_then(|(_, p)| p.parse().ok());
        match chars.next() {
            Some('f') | Some('F') => out.push_str(&format!("{:.*}", precision.unwrap_or(6), v)),
            Some('e') => out.push_str(&format!("{:.*e}", precision.unwrap_or(6), v)),
            Some('E') => out.push_str(&format!("{:.*E}", precision.unwrap_or(6), v)),
            Some('g') | Some('G') | Some('h') | Some('H') => out.push_str(&format_g(v)),
            Some('x') => out.push_str(&format!("{:x}", v as i64)),
            Some('X') => out.push_str(&format!("{:X}", v as i64)),
            Some('d') | Some('i') => out.push_str(&format!("{}", v as i64)),
            Some('s') => match precision {
                Some(p) => out.push_str(&format!("{mantissa:.p$}")),
                None => out.push_str(&format_g(mantissa)),
            },
            Some('c') => {
                const PREFIXES: &str = "yzafpnum kMGTPEZY";
                if power != 0 {
                    out.push(PREFIXES.chars().nth((power + 8) as usize).unwrap_or(' '));
                }
            }
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push_str(&spec);
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(png_bytes: &[u8]) -> (u32, u32, Vec<u8>) {
        let decoder = png::Decoder::new(png_bytes);
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        buf.truncate(info.buffer_size());
        (info.width, info.height, buf)
    }

    fn series(values: &[f64]) -> PlotSeries {
        PlotSeries {
            title: "sys.cpu.user{host=web01}".into(),
            points: values.iter().enumerate().map(|(i, v)| (1_700_000_000 + i as i64 * 60, *v)).collect(),
            ..PlotSeries::default()
        }
    }

    fn options() -> PlotOptions {
        PlotOptions { width: 400, height: 300, start_s: 1_700_000_000, end_s: 1_700_000_600, ..PlotOptions::default() }
    }

    #[test]
    fn renders_a_png_of_the_requested_size_that_depends_on_the_data() {
        let a = render_png(&options(), &[series(&[1.0, 5.0, 3.0, 8.0])]).unwrap();
        let b = render_png(&options(), &[series(&[1.0, 5.0, 3.0, 2.0])]).unwrap();
        let (w, h, pa) = decode(&a);
        assert_eq!((w, h), (400, 300));
        let (_, _, pb) = decode(&b);
        assert_ne!(pa, pb);
        // Coloured pixels: the series' line is drawn in Gnuplot's first colour.
        let violet = pa.chunks(3).filter(|p| p == &[0x94, 0x00, 0xd3]).count();
        assert!(violet > 20, "{violet} pixels of the series colour");
    }

    #[test]
    fn every_option_draws_without_error() {
        let mut right = series(&[100.0, 2000.0, 30.0]);
        right.apply_option("axis x1y2 with points");
        assert!(right.right_axis);
        assert_eq!(right.style, Some(Style::Points));
        for smooth in ["csplines", "bezier", "cumulative", "cnormal", "fnormal", "unique"] {
            let o = PlotOptions {
                title: Some("CPU".into()),
                ylabel: Some("percent".into()),
                y2label: Some("bytes".into()),
                yrange: Range::parse("[0:]").unwrap(),
                y2log: true,
                yformat: Some("%s%c".into()),
                xformat: Some("%H:%M".into()),
                key: Key::from_words("left bottom box"),
                smooth: Smooth::from_word(smooth),
                style: Style::Dots,
                background: parse_color("x000000").unwrap(),
                foreground: parse_color("xFFFFFF").unwrap(),
                ..options()
            };
            let (w, h, _) = decode(&render_png(&o, &[series(&[1.0, 2.0, 4.0]), right.clone()]).unwrap());
            assert_eq!((w, h), (400, 300), "{smooth}");
        }
        // No series at all: "No data", still the requested size.
        let (w, h, _) = decode(&render_png(&options(), &[]).unwrap());
        assert_eq!((w, h), (400, 300));
    }

    #[test]
    fn extreme_values_and_sizes_still_draw() {
        for values in [
            vec![f64::MAX, -f64::MAX, 1e-300],
            vec![f64::MAX, f64::MAX],
            vec![f64::INFINITY, 1.0, f64::NAN],
            vec![-5.0],
            vec![1e-320, 2e-320],
        ] {
            for log in [false, true] {
                let o = PlotOptions { width: 100, height: 100, ylog: log, end_s: 1_700_000_001, ..options() };
                let (w, h, _) = decode(&render_png(&o, &[series(&values)]).unwrap());
                assert_eq!((w, h), (100, 100), "{values:?}");
            }
        }
        let o =
            PlotOptions { yrange: Range { min: Some(5.0), max: Some(5.0) }, smooth: Some(Smooth::Bezier), ..options() };
        let many: Vec<f64> = (0..5000).map(|i| (i as f64).sin()).collect();
        assert!(render_png(&o, &[series(&many)]).is_ok());
    }

    #[test]
    fn gnuplot_ranges_and_formats() {
        assert_eq!(Range::parse("[0:10]"), Some(Range { min: Some(0.0), max: Some(10.0) }));
        assert_eq!(Range::parse("[:\"5e3\"]"), Some(Range { min: None, max: Some(5000.0) }));
        assert_eq!(Range::parse("[a:1]"), None);
        assert_eq!(Range::parse("0:1"), None);
        assert_eq!(format_g(1500000.0), "1.5e+06");
        assert_eq!(format_g(0.25), "0.25");
        assert_eq!(format_g(42.0), "42");
        assert_eq!(gnuplot_format("%s%cB", 2_500_000.0), "2.5MB");
        assert_eq!(gnuplot_format("%.1f%%", 12.345), "12.3%");
        assert_eq!(default_time_format(3600), "%H:%M");
        assert_eq!(time_step(3600, 8), 600);
        assert_eq!(time_step(600, 5), 120);
        assert_eq!(time_step(86400 * 7, 7), 86400);
        assert_eq!(Key::from_words("out left top").position, (-1, -1));
        assert_eq!(parse_color("x12AB34"), Some(RGBColor(0x12, 0xab, 0x34)));
        assert_eq!(parse_color("12AB34"), None);
    }
}
