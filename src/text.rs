//! Text at the terminal: tables the commands print, durations their flags take.

use std::time::Duration;

/// A command-line duration: `180` or `1.5` (seconds), or humantime's `90s`, `500ms`,
/// `3m`, `1h 30m`.
pub fn parse_cli_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if let Ok(secs) = t.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|_| format!("{s:?} is out of range"));
    }
    humantime::parse_duration(t)
        .map_err(|e| format!("{s:?} is not a duration ({e}; examples: 180, 90s, 500ms, 3m)"))
}

/// Left-aligned columns, two spaces apart, each line without trailing spaces.
pub fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, s)| format!("{s:<w$}", w = widths[c]))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn columns_line_up_and_lines_end_clean() {
        let rows = vec![
            vec!["A".to_string(), "BB".into(), "C".into()],
            vec!["long".to_string(), "x".into()],
        ];
        assert_eq!(super::table(&rows), "A     BB  C\nlong  x\n");
    }
}
