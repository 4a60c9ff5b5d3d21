//! Plain-text tables for the commands that print to a terminal.

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
