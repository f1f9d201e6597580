//! The docs as a map that holds: every relative link of the README, `docs/` and the other
//! documents resolves (the file, and the heading an anchor names), and every `fairlead`
//! command in their shell blocks names subcommands and flags the binary has. The README's
//! walks themselves run against `fairlead up` in `e2e/tests/readme.rs`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_fairlead");

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The documents checked: the repository's own, not the vendored ones.
fn documents() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in [root().to_path_buf(), root().join("docs")] {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    for name in [
        "charts/alb/README.md",
        "charts/service-with-healthchecks/README.md",
        "images/README.md",
    ] {
        files.push(root().join(name));
    }
    files.sort();
    files
}

/// The lines of `text` outside fenced code blocks, with their numbers.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            lines.push((n + 1, line));
        }
    }
    lines
}

/// The targets of the Markdown links `[text](target)` of `line`, but for inline code.
fn links(line: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut in_code = false;
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'`' => in_code = !in_code,
            b']' if !in_code && bytes.get(i + 1) == Some(&b'(') => {
                if let Some(end) = line[i + 2..].find(')') {
                    found.push(&line[i + 2..i + 2 + end]);
                    i += 2 + end;
                }
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// GitHub's anchor of a heading: lower case, spaces to hyphens, other punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    prose(text)
        .into_iter()
        .filter_map(|(_, line)| line.strip_prefix('#'))
        .map(|heading| slug(heading.trim_start_matches('#')))
        .collect()
}

#[test]
fn every_relative_link_resolves() {
    let mut broken = Vec::new();
    for file in documents() {
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in prose(&text) {
            for target in links(line) {
                if target.starts_with("http://")
                    || target.starts_with("https://")
                    || target.starts_with("mailto:")
                {
                    continue;
                }
                let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
                let resolved = if path.is_empty() {
                    file.clone()
                } else {
                    file.parent().unwrap().join(path)
                };
                let place = format!("{}:{n}: {target}", file.display());
                if !resolved.exists() {
                    broken.push(format!("{place} (no such file)"));
                } else if !anchor.is_empty() {
                    let headings = anchors(&std::fs::read_to_string(&resolved).unwrap());
                    if !headings.contains(anchor) {
                        broken.push(format!("{place} (no such heading)"));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The arguments of a `fairlead` command line, up to the first shell operator or comment.
fn arguments(line: &str) -> Vec<String> {
    line.split_whitespace()
        .take_while(|t| {
            !matches!(*t, "|" | "&" | "&&" | ";" | ">" | "<" | "||") && !t.starts_with('#')
        })
        .map(|t| t.trim_end_matches([',', '.', ';']).to_owned())
        .collect()
}

/// The `fairlead` commands of the prose's inline code spans (`` `fairlead graph -o dot` ``).
fn inline_commands(text: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for (_, line) in prose(text) {
        for (i, span) in line.split('`').enumerate() {
            if i % 2 == 1
                && let Some(rest) = span.strip_prefix("fairlead ")
            {
                found.push(arguments(rest));
            }
        }
    }
    found
}

/// The `fairlead` commands of the shell blocks of `text` (continuation lines joined), each
/// as its arguments up to the first shell operator or comment.
fn commands(text: &str) -> Vec<Vec<String>> {
    let mut found = inline_commands(text);
    let mut shell = false;
    let mut joined = String::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            shell = !shell && matches!(info.trim(), "sh" | "bash" | "console" | "shell");
            continue;
        }
        if !shell {
            continue;
        }
        if trimmed.starts_with('#') {
            continue;
        }
        if let Some(head) = line.strip_suffix('\\') {
            joined.push_str(head);
            continue;
        }
        joined.push_str(line);
        let whole = std::mem::take(&mut joined);
        for start in [
            "cargo run --release -- ",
            "target/release/fairlead ",
            "fairlead ",
        ] {
            let Some(at) = whole.find(start) else {
                continue;
            };
            // `fairlead ` inside a path or a word is not the command.
            if start == "fairlead " && at > 0 && !whole[..at].ends_with([' ', '(', '$']) {
                continue;
            }
            found.push(arguments(&whole[at + start.len()..]));
            break;
        }
    }
    found
}

/// `fairlead <path> --help`.
fn help(path: &[&str]) -> String {
    let out = Command::new(BIN).args(path).arg("--help").output().unwrap();
    assert!(out.status.success(), "fairlead {} --help", path.join(" "));
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands a help text lists.
fn subcommands(help: &str) -> BTreeSet<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn every_documented_command_has_its_subcommands_and_flags() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for file in documents() {
        let text = std::fs::read_to_string(&file).unwrap();
        for args in commands(&text) {
            let mut path: Vec<&str> = Vec::new();
            let mut text = help(&[]);
            for arg in &args {
                if subcommands(&text).contains(arg.as_str()) {
                    path.push(arg);
                    text = help(&path);
                } else if !arg.starts_with('-') {
                    // A value or a positional argument; the rest is flags and values.
                    continue;
                }
            }
            // Flags as the docs write them: `--a=v`, `[--a]`, `--a/--b` (alternatives).
            let flags = args
                .iter()
                .flat_map(|a| a.split('/'))
                .map(|a| a.trim_matches(['[', ']', '(', ')', '`']))
                .filter(|a| a.starts_with('-') && a.len() > 1 && *a != "--")
                .map(|a| a.split('=').next().unwrap());
            for name in flags {
                let listed = if name.starts_with("--") {
                    text.contains(&format!("{name} ")) || text.contains(&format!("{name}\n"))
                } else {
                    text.contains(&format!("{name},"))
                };
                if !listed {
                    wrong.push(format!(
                        "{}: `fairlead {}`: no flag {name}",
                        file.display(),
                        args.join(" ")
                    ));
                }
            }
            checked += 1;
        }
    }
    assert!(
        checked > 20,
        "only {checked} commands found: the extraction broke"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
