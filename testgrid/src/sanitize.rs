//! Text cleaning shared by every file TestGrid, Spyglass and Deck read.
//!
//! Why: one XML-illegal character (an ANSI colour escape, NUL, U+FFFE) makes TestGrid drop
//! the whole junit file and mark the build "Malformed artifacts" (reference §0 rule 2,
//! §2.1). quick-junit strips ANSI and C0 controls but lets U+FFFE/U+FFFF through, and the
//! build log is not XML at all but is still read by humans in Spyglass, where escape codes
//! are noise. Everything we write goes through [`clean_text`] first.

/// Removes ANSI escape sequences, drops characters XML 1.0 forbids (C0 controls other
/// than TAB, LF, CR) and replaces the non-characters U+FFFE/U+FFFF with U+FFFD.
///
/// The legal set is `#x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]`
/// (reference §2.1); Rust strings cannot hold surrogates, so the remaining cases are the
/// ones handled here.
pub fn clean_text(input: &str) -> String {
    let mut out = String::with_capacity(input.len());
    let mut chars = input.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => skip_escape(&mut chars),
            // C1 CSI: same grammar as `ESC [` without the ESC.
            '\u{9b}' => skip_csi(&mut chars),
            '\t' | '\n' | '\r' => out.push(c),
            '\u{0}'..='\u{1f}' => {}
            '\u{fffe}' | '\u{ffff}' => out.push('\u{fffd}'),
            _ => out.push(c),
        }
    }
    out
}

/// After an ESC: skips a CSI (`[` params final), an OSC/DCS/APC/PM string (ended by BEL or
/// `ESC \`), or a two-character escape.
fn skip_escape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    match chars.next() {
        Some('[') => skip_csi(chars),
        Some(']' | 'P' | '_' | '^' | 'X') => {
            while let Some(c) = chars.next() {
                if c == '\u{7}' || c == '\u{9c}' {
                    break;
                }
                if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                    chars.next();
                    break;
                }
            }
        }
        // Character-set selection and similar take one more character (`ESC ( B`).
        Some('(' | ')' | '*' | '+' | '#' | '%') => {
            chars.next();
        }
        _ => {}
    }
}

/// Skips CSI parameter/intermediate bytes up to and including the final byte (0x40–0x7E).
fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    for c in chars.by_ref() {
        if ('\u{40}'..='\u{7e}').contains(&c) {
            break;
        }
        if !('\u{20}'..='\u{3f}').contains(&c) {
            // Not a CSI byte: the sequence was malformed; stop without eating more text.
            break;
        }
    }
}

/// Keeps at most `max_bytes` of `text`: its head and tail, joined by a marker saying how
/// much was cut. The cause of a failure is usually at the start and the last state at the
/// end (reference §6 "cap detail at ~64 KiB keeping head+tail").
pub fn cap_head_tail(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_string();
    }
    let half = max_bytes / 2;
    let head_end = floor_char_boundary(text, half);
    let tail_start = ceil_char_boundary(text, text.len() - half);
    format!(
        "{}\n… [{} bytes cut] …\n{}",
        &text[..head_end],
        tail_start - head_end,
        &text[tail_start..]
    )
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char_boundary(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reference §2.1: anything outside #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF
    // makes Go's encoding/xml fail the whole file.
    #[test]
    fn xml_illegal_characters_are_removed_or_replaced() {
        let dirty = "a\u{0}b\u{b}c\u{c}d\u{fffe}e\u{ffff}f\tg\nh\ri";
        assert_eq!(clean_text(dirty), "abcd\u{fffd}e\u{fffd}f\tg\nh\ri");
    }

    #[test]
    fn astral_and_markup_characters_are_kept() {
        let s = "ok 😀 &<>\"' ]]> \u{10ffff} \u{e000} \u{d7ff}";
        assert_eq!(clean_text(s), s);
    }

    // Reference §0 rule 2: ANSI ESC is the usual way a junit file becomes malformed.
    #[test]
    fn ansi_sequences_are_stripped() {
        assert_eq!(clean_text("\x1b[31mred\x1b[0m plain"), "red plain");
        assert_eq!(clean_text("\x1b[1;38;5;196mx"), "x");
        assert_eq!(clean_text("\x1b]8;;http://x\x07link\x1b]8;;\x1b\\"), "link");
        assert_eq!(clean_text("\x1b(Bk"), "k");
        assert_eq!(clean_text("\u{9b}2Jz"), "z");
        assert_eq!(clean_text("trailing \x1b"), "trailing ");
    }

    #[test]
    fn long_text_keeps_head_and_tail_on_char_boundaries() {
        let text = format!("{}{}", "é".repeat(100), "z".repeat(100));
        let cut = cap_head_tail(&text, 50);
        assert!(cut.starts_with("é"));
        assert!(cut.ends_with("zzz"));
        assert!(cut.contains("bytes cut"));
        assert_eq!(cap_head_tail("short", 50), "short");
    }
}
