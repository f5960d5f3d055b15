//! Document and range formatting through `dlc fmt`'s formatter (`dlc_language::format`): the
//! whole file is formatted (the layout of a line depends on the statement around it) and the
//! result is sent as the changed runs of lines, so the cursor and unchanged lines stay put; a
//! range request keeps the runs that touch its lines. A file with syntax errors is not formatted.

use super::line_index::LineIndex;
use lsp_types::TextEdit;

/// The formatted file's edits (none when it is formatted already); `Err` when it cannot be
/// formatted, with why.
pub fn format(text: &str, lines: Option<(u32, u32)>) -> Result<Vec<TextEdit>, String> {
    let formatted = dlc_language::format::format(dlc_language::FileId(0), text).map_err(|e| match e {
        dlc_language::format::FormatError::Syntax(d) => format!("the file has syntax errors ({} of them); fix them to format it", d.len()),
        dlc_language::format::FormatError::Internal(m) => format!("not formatted: {m}"),
    })?;
    let old: Vec<&str> = text.split_inclusive('\n').collect();
    let new: Vec<&str> = formatted.split_inclusive('\n').collect();
    let idx = LineIndex::new(text);
    let mut edits = vec![];
    for (a0, a1, b0, b1) in hunks(&old, &new) {
        if let Some((first, last)) = lines {
            let (a0, a1) = (a0 as u32, a1 as u32);
            // A run touches the range when its old lines overlap it (an insertion: sits in it).
            let touches = if a0 == a1 { first <= a0 && a0 <= last + 1 } else { a0 <= last && a1 > first };
            if !touches {
                continue;
            }
        }
        let start = line_offset(&old, a0);
        let end = line_offset(&old, a1);
        edits.push(TextEdit { range: idx.range(text, start, end), new_text: new[b0..b1].concat() });
    }
    Ok(edits)
}

fn line_offset(lines: &[&str], n: usize) -> usize {
    lines[..n].iter().map(|l| l.len()).sum()
}

/// The runs of lines that differ: (old start, old end, new start, new end), from a longest
/// common subsequence of lines after the common head and tail are set aside (one run for the
/// whole middle when it is too large to compare line by line).
fn hunks(a: &[&str], b: &[&str]) -> Vec<(usize, usize, usize, usize)> {
    let head = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let tail = a[head..].iter().rev().zip(b[head..].iter().rev()).take_while(|(x, y)| x == y).count();
    let (a_mid, b_mid) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    if a_mid.is_empty() && b_mid.is_empty() {
        return vec![];
    }
    if a_mid.len() * b_mid.len() > 4_000_000 {
        return vec![(head, a.len() - tail, head, b.len() - tail)];
    }
    // lcs[i][j]: the longest common subsequence of a_mid[i..] and b_mid[j..].
    let (n, m) = (a_mid.len(), b_mid.len());
    let mut lcs = vec![0u32; (n + 1) * (m + 1)];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i * (m + 1) + j] = if a_mid[i] == b_mid[j] {
                lcs[(i + 1) * (m + 1) + j + 1] + 1
            } else {
                lcs[(i + 1) * (m + 1) + j].max(lcs[i * (m + 1) + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = vec![];
    let mut open: Option<(usize, usize)> = None;
    while i < n || j < m {
        if i < n && j < m && a_mid[i] == b_mid[j] {
            if let Some((oi, oj)) = open.take() {
                out.push((head + oi, head + i, head + oj, head + j));
            }
            i += 1;
            j += 1;
            continue;
        }
        open.get_or_insert((i, j));
        if j < m && (i == n || lcs[i * (m + 1) + j + 1] >= lcs[(i + 1) * (m + 1) + j]) {
            j += 1;
        } else {
            i += 1;
        }
    }
    if let Some((oi, oj)) = open {
        out.push((head + oi, head + n, head + oj, head + m));
    }
    out
}
