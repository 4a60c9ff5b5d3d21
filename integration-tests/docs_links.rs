//! Every relative link and anchor in the repository's Markdown resolves: README.md,
//! docs/ and any other `*.md` outside `target/` and hidden folders. Docs that point at
//! files which moved, or at headings that were renamed, fail here instead of on a
//! reader. Absolute URLs (any scheme) are not checked.

use std::collections::{HashMap, HashSet};
use std::path::{Component, Path, PathBuf};

use pulldown_cmark::{Event, LinkType, Options, Parser, Tag, TagEnd};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Markdown files under `dir`, skipping build output and hidden folders.
fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" && name != "node_modules" {
                markdown_files(&path, out);
            }
        } else if is_markdown(&path) {
            out.push(path);
        }
    }
}

fn is_markdown(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("md"))
}

fn parser(text: &str) -> Parser<'_> {
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS;
    Parser::new_ext(text, options)
}

/// GitHub's heading anchor: lowercase; drop everything but letters, digits, '-', '_'
/// and spaces; every space becomes '-'.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Slugs of a file's headings in order, repeats numbered -1, -2 ... as GitHub does.
fn unique_slugs<'a>(headings: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut seen: HashMap<String, u32> = HashMap::new();
    let mut out = Vec::new();
    for h in headings {
        let base = slug(h);
        let mut s = base.clone();
        while seen.contains_key(&s) {
            let n = seen.get_mut(&base).expect("base seen");
            *n += 1;
            s = format!("{base}-{n}");
        }
        seen.insert(s.clone(), 0);
        out.push(s);
    }
    out
}

/// Anchors a Markdown file defines: its headings' slugs.
fn anchors(text: &str) -> HashSet<String> {
    let mut headings = Vec::new();
    let mut current: Option<String> = None;
    for event in parser(text) {
        match event {
            Event::Start(Tag::Heading { .. }) => current = Some(String::new()),
            Event::End(TagEnd::Heading(_)) => headings.extend(current.take()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = current.as_mut() {
                    h.push_str(&t);
                }
            }
            _ => {}
        }
    }
    unique_slugs(headings.iter().map(String::as_str))
        .into_iter()
        .collect()
}

/// Relative link destinations of a Markdown text, with their line numbers.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (event, range) in parser(text).into_offset_iter() {
        let (link_type, dest) = match event {
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                ..
            })
            | Event::Start(Tag::Image {
                link_type,
                dest_url,
                ..
            }) => (link_type, dest_url),
            _ => continue,
        };
        if matches!(link_type, LinkType::Email) || has_scheme(&dest) || dest.starts_with("//") {
            continue;
        }
        let line = text[..range.start].matches('\n').count() + 1;
        out.push((line, dest.to_string()));
    }
    out
}

/// `http:`, `mailto:` and the like.
fn has_scheme(dest: &str) -> bool {
    match dest.split_once(':') {
        Some((scheme, _)) => {
            scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }
        None => false,
    }
}

fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// `path` with `.` and `..` folded away, or None if it climbs above its root.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            other => out.push(other),
        }
    }
    Some(out)
}

/// Why `dest`, linked from `file` (relative to the repository root), does not resolve.
fn broken(
    root: &Path,
    file: &Path,
    dest: &str,
    cache: &mut HashMap<PathBuf, HashSet<String>>,
) -> Option<String> {
    let (path, anchor) = match dest.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (dest, None),
    };
    let path = percent_decode(path.split('?').next().unwrap_or(""));
    let target = if path.is_empty() {
        file.to_path_buf()
    } else if let Some(from_root) = path.strip_prefix('/') {
        PathBuf::from(from_root)
    } else {
        file.parent().unwrap_or(Path::new("")).join(&path)
    };
    let Some(target) = normalize(&target) else {
        return Some("points outside the repository".into());
    };
    let full = root.join(&target);
    if !full.exists() {
        return Some(format!("{} does not exist", target.display()));
    }
    let anchor = percent_decode(anchor?);
    if is_markdown(&full) {
        let defined = cache.entry(target.clone()).or_insert_with(|| {
            anchors(&std::fs::read_to_string(&full).expect("read Markdown target"))
        });
        return (!defined.contains(&anchor))
            .then(|| format!("no heading or anchor #{anchor} in {}", target.display()));
    }
    let line_anchor = anchor.split('-').all(|l| {
        l.strip_prefix('L')
            .is_some_and(|n| n.parse::<u32>().is_ok())
    });
    (!line_anchor || full.is_dir()).then(|| {
        format!(
            "#{anchor}: only #L<n> line anchors can be checked in {}",
            target.display()
        )
    })
}

#[test]
fn every_relative_link_and_anchor_in_the_docs_resolves() {
    let root = repo();
    let mut files = Vec::new();
    markdown_files(&root, &mut files);
    files.sort();
    for expected in ["README.md", "docs/policies.md"] {
        assert!(files.contains(&root.join(expected)), "{expected} not found");
    }
    let mut cache = HashMap::new();
    let mut problems = Vec::new();
    let mut checked = 0;
    for full in &files {
        let file = full.strip_prefix(&root).expect("under the repository");
        let text = std::fs::read_to_string(full).expect("read Markdown file");
        for (line, dest) in links(&text) {
            checked += 1;
            if let Some(why) = broken(&root, file, &dest, &mut cache) {
                problems.push(format!("{}:{line}: {dest} -> {why}", file.display()));
            }
        }
    }
    assert!(
        checked > 0,
        "no relative links found in {} files",
        files.len()
    );
    assert!(
        problems.is_empty(),
        "{} broken link(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn slugs_follow_github() {
    assert_eq!(slug("One tick"), "one-tick");
    assert_eq!(
        slug("1. YARN: Docker containers, cgroups, an admin ACL, and YARN's preemption off"),
        "1-yarn-docker-containers-cgroups-an-admin-acl-and-yarns-preemption-off"
    );
    assert_eq!(
        slug("capacity+las: placement, queue limits, W and Q"),
        "capacitylas-placement-queue-limits-w-and-q"
    );
    assert_eq!(
        slug("snake_case and  two-spaces"),
        "snake_case-and--two-spaces"
    );
    assert_eq!(
        unique_slugs(["Measured", "Tests", "Measured", "Measured"]),
        ["measured", "tests", "measured-1", "measured-2"]
    );
    let text = "# The simulator (`preemptor sim`)\n\n## Speed\n";
    let found = anchors(text);
    for a in ["the-simulator-preemptor-sim", "speed"] {
        assert!(found.contains(a), "{a} missing from {found:?}");
    }
    assert_eq!(
        links("[a](docs/x.md#y) [b](https://x.org) <mailto:a@b.c>\n\n[c](#z)"),
        [(1, "docs/x.md#y".to_string()), (3, "#z".to_string())]
    );
}
